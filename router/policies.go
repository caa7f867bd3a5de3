package router

// Interface guards.
var (
	_ Policy       = (*LeastLoaded)(nil)
	_ Policy       = (*PrefixAware)(nil)
	_ Policy       = (*RoundRobin)(nil)
	_ PrefixReader = (*PrefixAware)(nil)
)

// LeastLoaded chooses the engine with the least work: this Caddy's calls
// in flight there (one that has not had its first token yet weighing
// 1+prefillWeight: its prefill is still to come), plus what the engine
// reports it has from others (other Caddy replicas, reservations). Ties
// go round. The default policy.
type LeastLoaded struct{}

// prefillWeight is what a call that has not had its first token yet
// weighs in LeastLoaded's score on top of its one call. Its prefill is
// work the engine has still to do, and a request sent after it waits for
// it: without the extra weight, requests that arrive together (a burst,
// or clients whose streams ended in the same step) all go to the engine
// that has just freed the most room, and queue there behind each other's
// prefills while the other engines only decode. With 1 (a prefilling
// call counting twice) an engine three calls lighter still took two
// prefills of a burst in one step; with 4 a burst's prefills spread
// almost as evenly as round robin's, while the calls still even out as
// they decode: side by side in one bench run, time to first token p50
// fell 1.3-3 ms (10-20%) at 16 and 64 concurrent against 1, with the
// same throughput and p99; 8 was no better than 4 and its p99 worse
// (tools/bench/README.md).
const prefillWeight = 4

// Choose returns the engine of least score; scanning in the router's
// rotating order makes ties go round the engines, so that a burst at
// equal load spreads instead of piling on the first.
func (LeastLoaded) Choose(_ *Request, cands []Candidate) int {
	best, bestScore := 0, leastLoadedScore(&cands[0])
	for i := 1; i < len(cands); i++ {
		if s := leastLoadedScore(&cands[i]); s < bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// leastLoadedScore is LeastLoaded's measure of an engine's work.
func leastLoadedScore(c *Candidate) float64 { return c.Calls() + prefillWeight*float64(c.Prefilling) }

// PrefixAware weighs load against the prompt prefix each engine is
// expected to hold in its prefix cache (Candidate.PrefixHit): a request
// goes where its prefill is cheapest, unless that engine is busier by
// more than the prefix saves. Its cost of an engine is in prompt tokens
// to prefill: the prompt minus the expected hit, plus loadTokens for
// every call in flight there, a call that has not had its first token
// yet counting twice. The tier already keeps saturated engines out, so a
// prefix hit never outweighs an engine that cannot take the request.
type PrefixAware struct{}

// loadTokens is what one call in flight costs, in tokens to prefill. A
// request queued behind others waits about as long as a prefill of some
// hundreds of tokens takes; but a request sent away from the engine that
// holds its prefix also evicts other prefixes where it lands, which
// their next requests pay for, so a miss costs about twice its prefill:
// 128 tokens a call weighs that. (With 256, prefixbench's hit rate fell
// by a quarter: bursts sent requests away from their prefixes, and the
// caches thrashed.)
//
// A call still prefilling counts twice, less than in LeastLoaded: this
// cost is in prompt tokens, which already count the prefill of the
// request to place, and spreading a burst's prefills sends requests away
// from their prefixes. With LeastLoaded's weight, prefixbench's hit rate
// fell from 77% to 57% and its throughput by 40%.
const loadTokens = 128

// Choose returns the engine of least cost; the first of equals.
func (PrefixAware) Choose(req *Request, cands []Candidate) int {
	best, bestCost := 0, 0.0
	for i := range cands {
		c := &cands[i]
		load := c.Calls() + float64(c.Prefilling)
		cost := float64(len(req.Prompt)-max(c.PrefixHit, 0)) + load*loadTokens
		if i == 0 || cost < bestCost {
			best, bestCost = i, cost
		}
	}
	return best
}

// ReadsPrefixHit says that PrefixAware reads Candidate.PrefixHit.
func (PrefixAware) ReadsPrefixHit() bool { return true }

// RoundRobin takes the engines in turn, whatever their load: the first
// candidate, as the router rotates them.
type RoundRobin struct{}

// Choose returns the first candidate.
func (RoundRobin) Choose(*Request, []Candidate) int { return 0 }
