package router

// Interface guards.
var (
	_ Policy        = (*SLOAware)(nil)
	_ LatencyReader = (*SLOAware)(nil)
)

// SLOAware chooses, for a request with latency targets (Request.Targets),
// an engine predicted to meet them: each engine's predicted time to first
// token and per output token (Candidate.TTFT, TPOT, from its latency
// model) against the targets gives its headroom, the smaller of the two
// margins as a share of its target. Among the engines with a safe
// headroom (sloSafe or more) it takes the one with the least: the best
// fit, which keeps the fastest engines for the tightest targets (a long
// prompt with loose targets goes to the slower engine it still suits,
// instead of stalling the chat streams of a fast one). When none is safe,
// the one with the most headroom, the least bad. An engine whose model
// cannot say yet counts as meeting the targets just (headroom 0), so
// that it is tried once the known ones fall short. A request without
// targets, or with no engine known, is chosen as LeastLoaded chooses,
// and so are near ties (sloTie), to spread them.
type SLOAware struct{}

// The headroom SLOAware deems safe (prediction errors are some tens of
// percent under load), and within which engines are equal and load
// decides.
const (
	sloSafe = 0.3
	sloTie  = 0.05
)

// Choose returns the safe engine of least headroom, else the engine of
// most.
func (SLOAware) Choose(req *Request, cands []Candidate) int {
	t := req.Targets
	if !t.Set() {
		return LeastLoaded{}.Choose(req, cands)
	}
	fit, most := -1, -1
	var fitRoom, mostRoom float64
	known := false
	for i := range cands {
		room, ok := headroom(t, &cands[i])
		known = known || ok
		if ok && room >= sloSafe && (fit < 0 || better(room, fitRoom, -1, &cands[i], &cands[fit])) {
			fit, fitRoom = i, room
		}
		if most < 0 || better(room, mostRoom, 1, &cands[i], &cands[most]) {
			most, mostRoom = i, room
		}
	}
	switch {
	case !known:
		return LeastLoaded{}.Choose(req, cands)
	case fit >= 0:
		return fit
	}
	return most
}

// better says whether an engine of headroom room beats the best so far
// (of headroom best) for a policy that wants more headroom (sign 1) or
// less (-1); within sloTie, the less loaded wins.
func better(room, best float64, sign float64, c, b *Candidate) bool {
	if d := sign * (room - best); d > sloTie || d < -sloTie {
		return d > 0
	}
	return leastLoadedScore(c) < leastLoadedScore(b)
}

// headroom is how far under its targets the engine is predicted to
// serve the request, as a share of the target (the smaller of the two);
// 0, and false, when its model cannot say.
func headroom(t Targets, c *Candidate) (float64, bool) {
	room := 1.0
	if t.TTFT > 0 {
		if c.TTFT == 0 {
			return 0, false
		}
		room = min(room, float64(t.TTFT-c.TTFT)/float64(t.TTFT))
	}
	if t.TPOT > 0 && c.Role != "prefill" {
		if c.TPOT == 0 {
			return 0, false
		}
		room = min(room, float64(t.TPOT-c.TPOT)/float64(t.TPOT))
	}
	return room, true
}

// ReadsLatency says that SLOAware reads Candidate.TTFT and TPOT.
func (SLOAware) ReadsLatency() bool { return true }
