package caddymlc

import "time"

// lease is an engine chosen for a call: the engine, the process it was
// chosen as (health reports name the process, so a restarted engine does
// not inherit the old one's failures), and the hold that counts the call
// in the engine's load until release.
type lease struct {
	*upstream
	pid     int
	release func()
}

// Choice tiers, best first. Within a tier the least-loaded engine wins,
// ties going round the candidates in turn, so that bursts spread instead
// of piling on the first engine.
const (
	tierGood      = iota // ready, breaker closed, room for the request
	tierSaturated        // would queue behind held KV pages
	tierAvoided          // failed this request before
	tierBroken           // breaker open: only when nothing else is ready
	tierNone
)

// pickOptions say what a call needs.
type pickOptions struct {
	avoid     map[string]bool // engines that failed this request
	needPages int             // KV pages the call will hold, 0 if unknown
	exclude   *upstream       // not this engine (the decode engine, when choosing a prefill engine)
	noBroken  bool            // never an engine whose breaker is open (there is a fallback)
}

// pick chooses the engine among candidates (endpoint indexes) for a call
// and holds it, or returns nil when none is ready. Only engines the fleet
// says are ready are candidates; among them the breaker, the request's
// own failures and the KV room order the choice, and an engine whose
// breaker is open is taken as a last resort, when nothing else is ready:
// an answer from a doubtful engine beats a 503.
func (lf *liveFleet) pick(candidates []int, o pickOptions) *lease {
	if len(candidates) == 0 {
		return nil
	}
	now := time.Now()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	var best *upstream
	bestPID, bestTier, bestScore := 0, tierNone, int64(0)
	var bestFails int
	var bestReopen time.Time
	n := len(candidates)
	first := int(lf.rotation.Add(1) % uint64(n))
	for k := range n {
		u := lf.upstreams[candidates[(first+k)%n]]
		if u == o.exclude {
			continue
		}
		ready, pid := u.status()
		if !ready {
			continue
		}
		tier := tierGood
		switch {
		case u.breaker.state(pid) == breakerOpen:
			if o.noBroken {
				continue
			}
			tier = tierBroken
		case o.avoid[u.addr]:
			tier = tierAvoided
		case u.saturated(now, o.needPages):
			tier = tierSaturated
		}
		if tier > bestTier {
			continue
		}
		if tier == tierBroken {
			// The least bad: fewest failures in a row, then the first to
			// cool down.
			fails, reopen := u.breaker.badness()
			if tier == bestTier && (fails > bestFails || fails == bestFails && !reopen.Before(bestReopen)) {
				continue
			}
			best, bestPID, bestTier, bestFails, bestReopen = u, pid, tier, fails, reopen
			continue
		}
		score := u.score(now)
		if tier == bestTier && score >= bestScore {
			continue
		}
		best, bestPID, bestTier, bestScore = u, pid, tier, score
	}
	if best == nil {
		return nil
	}
	best.breaker.admit(bestPID)
	return &lease{upstream: best, pid: bestPID, release: best.hold()}
}

// kvPageTokens is the tokens per KV page of MLC's engines (and of the
// built-in engine): what a prompt's KV need is estimated in.
const kvPageTokens = 16

// pagesFor estimates the KV pages a request of n tokens holds.
func pagesFor(n int) int { return (n + kvPageTokens - 1) / kvPageTokens }
