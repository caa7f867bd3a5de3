package caddymlc

import (
	"fmt"
	"time"
)

// Selection policies: how the router chooses among equally healthy
// engines (the decode engine in disagg mode, the engine in round_robin
// mode; prefill engines are always least loaded). Names as Caddy's
// reverse_proxy names its own lb_policy values.
const (
	// PolicyLeastLoaded chooses the engine with the least work: the
	// router's calls in flight (one that has not had its first token yet
	// weighing five: its prefill is still to come), plus what the engine
	// reports it has from others
	// (other Caddy replicas, reservations). Ties go round.
	PolicyLeastLoaded = "least_loaded"
	// PolicyPrefixAware weighs load against the prompt prefix each
	// engine is expected to hold in its prefix cache: a request goes
	// where its prefill is cheapest, unless that engine is busier by more
	// than the prefix saves.
	PolicyPrefixAware = "prefix_aware"
	// PolicyRoundRobin takes the engines in turn, whatever their load.
	PolicyRoundRobin = "round_robin"
)

// selectionPolicy chooses one of cs, engines of the same tier (all ready,
// none saturated unless all are). first is a rotating offset in cs, for
// policies that break ties or rotate.
type selectionPolicy interface {
	choose(cs []candidate, o pickOptions, now time.Time, first int) candidate
}

// newPolicy returns the policy named name.
func newPolicy(name string) (selectionPolicy, error) {
	switch name {
	case "", PolicyLeastLoaded:
		return leastLoaded{}, nil
	case PolicyPrefixAware:
		return prefixAware{}, nil
	case PolicyRoundRobin:
		return roundRobin{}, nil
	}
	return nil, fmt.Errorf("policy %q: want %s, %s or %s", name, PolicyLeastLoaded, PolicyPrefixAware, PolicyRoundRobin)
}

// leastLoaded is PolicyLeastLoaded. Scanning from the rotating offset
// makes ties go round the engines, so that a burst at equal load spreads
// instead of piling on the first.
type leastLoaded struct{}

func (leastLoaded) choose(cs []candidate, _ pickOptions, now time.Time, first int) candidate {
	best, bestScore := cs[first], cs[first].score(now)
	for k := 1; k < len(cs); k++ {
		c := cs[(first+k)%len(cs)]
		if s := c.score(now); s < bestScore {
			best, bestScore = c, s
		}
	}
	return best
}

// roundRobin is PolicyRoundRobin.
type roundRobin struct{}

func (roundRobin) choose(cs []candidate, _ pickOptions, _ time.Time, first int) candidate {
	return cs[first]
}

// prefixAware is PolicyPrefixAware. Its cost of an engine is in prompt
// tokens to prefill: the prompt minus the prefix the engine is expected
// to hold, plus loadTokens for every call in flight there (see
// upstream.prefixLoad). The tier
// already keeps saturated engines out, so a prefix hit never outweighs an
// engine that cannot take the request.
type prefixAware struct{}

// loadTokens is what one call in flight costs, in tokens to prefill. A
// request queued behind others waits about as long as a prefill of some
// hundreds of tokens takes; but a request sent away from the engine that
// holds its prefix also evicts other prefixes where it lands, which
// their next requests pay for, so a miss costs about twice its prefill:
// 128 tokens a call weighs that. (With 256, prefixbench's hit rate fell
// by a quarter: bursts sent requests away from their prefixes, and the
// caches thrashed.)
const loadTokens = 128

func (prefixAware) choose(cs []candidate, o pickOptions, now time.Time, first int) candidate {
	chain := prefixChain(o.prompt)
	var best candidate
	bestCost := -1.0
	for k := range len(cs) {
		c := cs[(first+k)%len(cs)]
		hit := c.prefixes.match(chain)
		cost := float64(len(o.prompt)-hit) + c.prefixLoad(now)*loadTokens
		if bestCost < 0 || cost < bestCost {
			best, bestCost = c, cost
		}
	}
	return best
}
