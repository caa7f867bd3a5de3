package cluster

import (
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// What this replica takes from the others' words and tells them, over
// its live routers: the requests its gates let through (inFlight), and
// the prefix changes the others made, applied to its own indexes.

// inFlight returns the requests model's gates have let through to the
// engines and that have not ended, over every live router of model (a
// gate kept across a reload counted once).
func inFlight(live *router.Live, model string) int {
	n := 0
	seen := map[*fair.Queue]bool{}
	for _, r := range live.Routers() {
		if r.Model != model {
			continue
		}
		if q, in := r.Admitted(); q != nil && !seen[q] {
			seen[q] = true
			n += in
		}
	}
	return n
}

// applyPrefixEvents makes other replicas' changes to the prefix indexes
// of model's engines, on the routers that keep one (a prefix-reading
// policy's). An event of an engine this process does not route to is
// ignored.
func applyPrefixEvents(live *router.Live, model string, evs []router.PrefixEvent) {
	engines := prefixEngines(live, model)
	if len(engines) == 0 {
		return
	}
	sharedMetrics()
	for _, ev := range evs {
		us := engines[ev.Engine]
		for _, u := range us {
			u.ApplyPrefixEvent(ev)
		}
		if len(us) > 0 {
			prefixApplied.WithLabelValues(ev.Kind.String()).Inc()
		}
	}
}

// prefixEngines returns the engines of model's routers that keep a prefix
// index, by address: their pools' and the discovered ones, each once.
func prefixEngines(live *router.Live, model string) map[string][]*router.Upstream {
	var out map[string][]*router.Upstream
	seen := map[*router.Upstream]bool{}
	add := func(u *router.Upstream) {
		if seen[u] {
			return
		}
		seen[u] = true
		if out == nil {
			out = map[string][]*router.Upstream{}
		}
		out[u.Addr()] = append(out[u.Addr()], u)
	}
	for _, r := range live.Routers() {
		if r.Model != model || !r.KeepsPrefixIndex() {
			continue
		}
		if p := r.Pool(); p != nil {
			for _, u := range p.Upstreams() {
				add(u)
			}
		}
		if d := r.Discovered(); d != nil {
			for _, role := range []string{"", engine.RolePrefill, engine.RoleDecode} {
				for _, u := range d.Engines(role) {
					add(u)
				}
			}
		}
	}
	return out
}
