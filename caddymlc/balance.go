package caddymlc

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// lease is an engine chosen for a call: the engine, the process it was
// chosen as (health reports name the process, so a restarted engine does
// not inherit the old one's failures), and the hold that counts the call
// in the engine's load until release.
type lease struct {
	*upstream
	pid     int
	release func()
	started func() // at the call's first token; nil when nothing counts it
}

// firstToken reports the call's first token: its prefill is done.
func (l *lease) firstToken() {
	if l.started != nil {
		l.started()
	}
}

// Choice tiers, best first. The selection policy chooses within the best
// tier that has an engine.
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
	prompt    []int           // the prompt's token ids, for prefix_aware
	needPages int             // KV pages the call will hold, 0 if unknown
	exclude   *upstream       // not this engine (the decode engine, when choosing a prefill engine)
	noBroken  bool            // never an engine whose breaker is open (there is a fallback)
}

// candidate is an engine that may be chosen, with the process it runs.
type candidate struct {
	*upstream
	pid int
}

// pick chooses the engine of role (engine.RolePrefill, engine.RoleDecode,
// or "" for any engine) for a call and holds it, or returns nil when none
// is ready. Only engines their fleet says are ready are candidates; among
// them the breaker, the request's own failures and the KV room sort them
// into tiers, and the router's selection policy chooses in the best tier.
// An engine whose breaker is open is taken as a last resort, when nothing
// else is ready: an answer from a doubtful engine beats a 503.
func (r *Router) pick(role string, o pickOptions) *lease {
	cands := r.candidates(role)
	if len(cands) == 0 {
		return nil
	}
	now := time.Now()
	r.pickMu.Lock()
	defer r.pickMu.Unlock()
	var tiers [tierNone][]candidate
	for _, u := range cands {
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
		tiers[tier] = append(tiers[tier], candidate{u, pid})
	}
	for tier, cs := range tiers {
		if len(cs) == 0 {
			continue
		}
		var best candidate
		if tier == tierBroken {
			best = leastBroken(cs)
		} else {
			best = r.policy.choose(cs, o, now, int(r.rotation.Add(1)%uint64(len(cs))))
		}
		best.breaker.admit(best.pid)
		l := &lease{upstream: best.upstream, pid: best.pid}
		l.release, l.started = best.hold()
		return l
	}
	return nil
}

// candidates returns the engines of role the router may use: its fleet's
// endpoints of that role, and those its dynamic sources found.
func (r *Router) candidates(role string) []*upstream {
	var out []*upstream
	if lf := r.handle.get(); lf != nil {
		for _, i := range r.roles[role] {
			out = append(out, lf.upstreams[i])
		}
	}
	if r.dynamic != nil {
		out = append(out, r.dynamic.list(role)...)
	}
	return out
}

// leastBroken is the least bad of engines whose breakers are open: fewest
// failures in a row, then the first to cool down.
func leastBroken(cs []candidate) candidate {
	best := cs[0]
	bestFails, bestReopen := best.breaker.badness()
	for _, c := range cs[1:] {
		fails, reopen := c.breaker.badness()
		if fails < bestFails || fails == bestFails && reopen.Before(bestReopen) {
			best, bestFails, bestReopen = c, fails, reopen
		}
	}
	return best
}

// roleIndexes returns, for every role a call can need, the endpoints of
// the mode that serve it: "" (any engine, round_robin mode), prefill and
// decode (disagg mode).
func roleIndexes(mode string, eps []engine.Endpoint) map[string][]int {
	all := make([]int, len(eps))
	for i := range all {
		all[i] = i
	}
	roles := map[string][]int{"": all}
	if mode == ModeDisagg {
		roles[engine.RolePrefill], roles[engine.RoleDecode], _ = splitRoles(eps)
	}
	return roles
}

// kvPageTokens is the tokens per KV page of MLC's engines (and of the
// built-in engine): what a prompt's KV need is estimated in.
const kvPageTokens = 16

// pagesFor estimates the KV pages a request of n tokens holds.
func pagesFor(n int) int { return (n + kvPageTokens - 1) / kvPageTokens }
