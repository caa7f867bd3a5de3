package router

// Interface guards.
var (
	_ Policy        = (*SLOAware)(nil)
	_ LatencyReader = (*SLOAware)(nil)
)

// SLOAware chooses, for a request with latency targets (Request.Targets),
// the engine predicted to meet them with the most headroom: each engine's
// predicted time to first token and per output token (Candidate.TTFT,
// TPOT, from its latency model) against the targets, the headroom being
// the smaller of the two margins as a share of its target. When no engine
// is predicted to meet them, the least bad (the least negative headroom);
// an engine whose model cannot say yet counts as meeting them just, so
// that it is tried once the known ones fall short. A request without
// targets, or with no engine known, is chosen as LeastLoaded chooses,
// and so are near ties of headroom, to spread them.
type SLOAware struct{}

// sloTie is the headroom within which engines are equal, and load decides.
const sloTie = 0.05

// Choose returns the engine of most headroom.
func (SLOAware) Choose(req *Request, cands []Candidate) int {
	t := req.Targets
	if !t.Set() {
		return LeastLoaded{}.Choose(req, cands)
	}
	best, bestRoom, known := 0, 0.0, false
	for i := range cands {
		room, ok := headroom(t, &cands[i])
		known = known || ok
		switch {
		case i == 0:
			bestRoom = room
		case room > bestRoom+sloTie:
			best, bestRoom = i, room
		case room > bestRoom-sloTie && leastLoadedScore(&cands[i]) < leastLoadedScore(&cands[best]):
			best, bestRoom = i, max(room, bestRoom)
		}
	}
	if !known {
		return LeastLoaded{}.Choose(req, cands)
	}
	return best
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
