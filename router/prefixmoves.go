package router

// Prefix moves: a request that the prefix index expected to find most of
// its prompt in one engine's cache, routed to another. Under prefix_aware
// a session keeps landing where its head is unless that engine is
// saturated (or the request must avoid it, or its breaker is open), or
// busier by more than the prefix saves; each time it does not, the move
// is counted in caddy_mlc_prefix_moves_total by why.

// Reasons of a prefix move.
const (
	moveLoad      = "load"      // the holder was busier than the prefix was worth
	moveSaturated = "saturated" // the holder had no room for the request
	moveAvoided   = "avoided"   // the holder failed an earlier attempt of the request
	moveBroken    = "broken"    // the holder's breaker was open
)

// moveReason names why a request left the engine of the longest expected
// prefix, from that engine's tier.
func moveReason(t Tier) string {
	switch t {
	case TierGood:
		return moveLoad
	case TierSaturated:
		return moveSaturated
	case TierAvoided:
		return moveAvoided
	}
	return moveBroken
}

// notePrefixMove counts a move when chosen holds less of req's prompt
// than the engine of the longest expected prefix among the candidates,
// by tier. For a prefill engine the prompt's window (all but its last
// token) is what counts, as its index holds.
func notePrefixMove(m *routerMetrics, role string, req *Request, tiers [][]candidate, chosen candidate) {
	if req == nil || len(req.Prompt) < kvPageTokens {
		return
	}
	chain := windowChain(role, req)
	bestHit, bestTier, chosenHit := 0, Tier(0), -1
	for t, cs := range tiers {
		for _, c := range cs {
			hit := c.prefixes.match(chain)
			if c.Upstream == chosen.Upstream {
				chosenHit = hit
			}
			if hit > bestHit {
				bestHit, bestTier = hit, Tier(t)
			}
		}
	}
	if bestHit > 0 && chosenHit >= 0 && chosenHit < bestHit {
		m.cache.moves.WithLabelValues(moveReason(bestTier)).Inc()
	}
}
