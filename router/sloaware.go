package router

import "github.com/caddy-mlc/caddy-mlc/engine"

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
// headroom (sloSafe or more) it takes the slowest (Candidate.IdleTTFT):
// the best fit, which keeps the fastest engines for the tightest targets
// (a long prompt with loose targets goes to the slower engine it still
// suits, instead of stalling the chat streams of a fast one); engines of
// about the same speed (sloSameSpeed) are told apart by load, as
// LeastLoaded does. When none is safe, the one with the most headroom,
// the least bad. An engine whose model cannot say yet (new, or not
// used for some seconds) is taken when it is idle, so that its model
// learns; busy, it counts as meeting the targets just (headroom 0). A
// request without targets, or with no engine known, is
// chosen as LeastLoaded chooses.
type SLOAware struct{}

// The headroom SLOAware deems safe (predictions are some tens of percent
// off under load); the ratio of speeds within which engines are alike;
// the headroom within which the least bad engines are alike.
const (
	sloSafe      = 0.3
	sloSameSpeed = 1.25
	sloTie       = 0.05
)

// Choose returns the slowest safe engine, else the engine of most
// headroom.
func (SLOAware) Choose(req *Request, cands []Candidate) int {
	t := req.Targets
	if !t.Set() {
		return LeastLoaded{}.Choose(req, cands)
	}
	fit, most := -1, -1
	var mostRoom float64
	known := false
	for i := range cands {
		c := &cands[i]
		room, ok := headroom(t, c)
		if !ok && c.Calls() == 0 {
			return i // an idle engine the model cannot judge: a probe
		}
		known = known || ok
		if ok && room >= sloSafe && (fit < 0 || slowerFit(c, &cands[fit])) {
			fit = i
		}
		if most < 0 || moreRoom(room, mostRoom, c, &cands[most]) {
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

// slowerFit says whether c is a better fit than b: clearly slower, or as
// fast and less loaded.
func slowerFit(c, b *Candidate) bool {
	switch {
	case float64(c.IdleTTFT) > sloSameSpeed*float64(b.IdleTTFT):
		return true
	case float64(b.IdleTTFT) > sloSameSpeed*float64(c.IdleTTFT):
		return false
	}
	return leastLoadedScore(c) < leastLoadedScore(b)
}

// moreRoom says whether an engine of headroom room beats the best so far
// (of headroom best): clearly more, or about as much and less loaded.
func moreRoom(room, best float64, c, b *Candidate) bool {
	if d := room - best; d > sloTie || d < -sloTie {
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
	if t.TPOT > 0 && c.Role != RoleName(engine.RolePrefill) {
		if c.TPOT == 0 {
			return 0, false
		}
		room = min(room, float64(t.TPOT-c.TPOT)/float64(t.TPOT))
	}
	return room, true
}

// ReadsLatency says that SLOAware reads Candidate.TTFT and TPOT.
func (SLOAware) ReadsLatency() bool { return true }
