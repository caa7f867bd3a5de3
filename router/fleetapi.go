package router

import (
	"slices"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// What package fleet (the engines' lifecycle: drains, rolling restarts,
// retired fleets, the autoscaler, the operator's status) reads of the
// routers and their engines.

// asleep reports that the router's engines may all be scaled down by
// its fleet's autoscaler: its next request starts one (readiness: cold).
func asleep(r *Router) bool {
	p := r.handle.get()
	return p != nil && p.isAsleep()
}

// cold names the models asleep (see asleep) with no engine ready.
func (m *Models) cold() []string {
	var out []string
	for _, r := range m.routers {
		if asleep(r) && r.readyGenerating() == 0 {
			out = append(out, r.Model)
		}
	}
	return out
}

// Routers are the live routers, ordered by model.
func (lv *Live) Routers() []*Router {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	out := make([]*Router, 0, len(lv.routers))
	for r := range lv.routers {
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b *Router) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// NextChange returns a channel closed at the next change of an engine
// (see EnginesChanged).
func (lv *Live) NextChange() <-chan struct{} { return lv.changes.wait() }

// Pool is the router's fleet's pool: nil before the config starts, or
// for a router with only discovered engines.
func (r *Router) Pool() *Pool { return r.handle.get() }

// Shown is the pool /mlc/engines describes: the attached one, else the
// one being started, else nil.
func (r *Router) Shown() *Pool { return r.handle.Shown() }

// Engines are every engine the router may use: its pool's, then those
// discovered.
func (r *Router) Engines() []*Upstream { return r.candidates("") }

// Demand is what a router asks of its engines, as an autoscaler reads
// it.
type Demand struct {
	// Generating are the endpoint indexes of the generating engines: the
	// decode engines in disagg mode, all in whole.
	Generating []int
	// Waiting counts the requests that wait: in the gate's queue, or for
	// an engine to be ready at all.
	Waiting int
	// Batch is each generating engine's batch as the gate bounds it; 0:
	// unknown.
	Batch int
}

// Demand is what the router asks of its engines now.
func (r *Router) Demand() Demand {
	return Demand{Generating: r.roles[r.strategy.generatingRole()],
		Waiting: r.gate.queue.Stats().Waiting + int(r.queued.Load()), Batch: r.gate.batch}
}

// GeneratingEndpoints are the indexes of the endpoints of eps whose
// engines generate in mode.
func GeneratingEndpoints(mode string, eps []engine.Endpoint) []int {
	s := newStrategy(&Router{Config: Config{Mode: mode}})
	return s.roles(eps)[s.generatingRole()]
}

// CloseIdle drops the router's idle connections to its engines: after
// an engine restarted, they went to its old process.
func (r *Router) CloseIdle() { r.client.close() }

// Pool is the engine's pool.
func (u *Upstream) Pool() *Pool { return u.pool }

// Index is the engine's endpoint index in its pool.
func (u *Upstream) Index() int { return u.index }

// InFlight counts the calls that hold the engine now.
func (u *Upstream) InFlight() int64 { return u.inflight.Load() }

// Ready reports that the engine's process is ready.
func (u *Upstream) Ready() bool {
	ready, _ := u.status()
	return ready
}

// KVUse is the share of the engine's KV pages in use and whether it had
// work it could not start for want of pages, from its last load report;
// ok is false when the engine is not ready or its report is missing or
// stale.
func (u *Upstream) KVUse(now time.Time) (used float64, blocked, ok bool) {
	l := u.load.Load()
	if !u.Ready() || l == nil || now.Sub(l.at) > loadStale || l.PagesTotal == 0 {
		return 0, false, false
	}
	return float64(l.PagesTotal-l.PagesFree-l.PagesCached) / float64(l.PagesTotal), l.Blocked > 0, true
}
