package router

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// What package fleet (the engines' lifecycle: an operator's drain, the
// rolling restart, the autoscaler) reads of the routers and acts on.

// A Scaler sizes a fleet's spawned engines while they run (package
// fleet's autoscaler): the fleet ticks it from the moment its engines
// are ready until they stop, and its state shows in /mlc/engines.
type Scaler interface {
	// Interval is the time to the next Tick.
	Interval() time.Duration
	// Tick takes one decision and starts its action; ctx ends with the
	// fleet's engines.
	Tick(ctx context.Context)
	// Status is the autoscaling as operators see it; nil without one.
	Status() *ScaleStatus
	// EngineState is its hold on engine i: "" when it runs as usual.
	EngineState(i int) string
	// Asleep reports that every engine may be scaled down (min 0): the
	// next request starts one, so the router is ready all the same.
	Asleep() bool
}

// asleep reports that the router's engines may all be scaled down by
// its fleet's autoscaler: its next request starts one (readiness: cold).
func asleep(r *Router) bool {
	lf := r.handle.get()
	if lf == nil {
		return false
	}
	s := lf.Scaler()
	return s != nil && s.Asleep()
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

// SetScaler makes s the fleet's autoscaler.
func (lf *LiveFleet) SetScaler(s Scaler) { lf.scaler.Store(&s) }

// Scaler is the fleet's autoscaler, nil for none.
func (lf *LiveFleet) Scaler() Scaler {
	if s := lf.scaler.Load(); s != nil {
		return *s
	}
	return nil
}

// Grace is how long the fleet's engines may drain.
func (lf *LiveFleet) Grace() time.Duration { return time.Duration(lf.grace.Load()) }

// Wake tells the routers waiting for an engine to look again: one was
// started, or taken out of rotation.
func (lf *LiveFleet) Wake() { lf.wake() }

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

// Fleet is the router's fleet: nil before the config starts, or for a
// router with only discovered engines.
func (r *Router) Fleet() *LiveFleet { return r.handle.get() }

// Engines are every engine the router may use: its fleet's, then those
// discovered.
func (r *Router) Engines() []*Upstream { return r.candidates("") }

// SpawnedEngines are the engines of the router's fleet that it runs
// itself (not those its autoscaler stopped); none while its fleet drains
// after a reload.
func (r *Router) SpawnedEngines() []*Upstream {
	lf := r.handle.get()
	if lf == nil || lf.draining() {
		return nil
	}
	var out []*Upstream
	for _, i := range engine.Spawned(lf.spec.Endpoints) {
		if !lf.Parked(i) {
			out = append(out, lf.upstreams[i])
		}
	}
	return out
}

// GeneratingIndexes are the endpoint indexes of the router's generating
// engines: the decode engines in disagg mode, all in whole.
func (r *Router) GeneratingIndexes() []int { return r.roles[r.strategy.generatingRole()] }

// GeneratingEndpoints are the indexes of the endpoints of eps whose
// engines generate in mode.
func GeneratingEndpoints(mode string, eps []engine.Endpoint) []int {
	s := newStrategy(&Router{Config: Config{Mode: mode}})
	return s.roles(eps)[s.generatingRole()]
}

// Waiting counts the router's requests that wait: in the gate's queue,
// or for an engine to be ready at all.
func (r *Router) Waiting() int { return r.gate.queue.Stats().Waiting + int(r.queued.Load()) }

// Batch is each generating engine's batch as the gate bounds it; 0:
// unknown.
func (r *Router) Batch() int { return r.gate.batch }

// CloseIdle drops the router's idle connections to its engines: after
// an engine restarted, they went to its old process.
func (r *Router) CloseIdle() { r.client.close() }

// Fleet is the engine's fleet.
func (u *Upstream) Fleet() *LiveFleet { return u.fleet }

// Index is the engine's endpoint index in its fleet.
func (u *Upstream) Index() int { return u.index }

// InFlight counts the calls that hold the engine now.
func (u *Upstream) InFlight() int64 { return u.inflight.Load() }

// Ready reports that the engine's process is ready.
func (u *Upstream) Ready() bool {
	ready, _ := u.status()
	return ready
}

// Draining reports that the engine takes no new attempt (Drain).
func (u *Upstream) Draining() bool { return u.draining() }

// DrainState is the engine's drain: "" in rotation, DrainDraining or
// DrainDrained.
func (u *Upstream) DrainState() string { return u.drainStatus() }

// ClearDrain ends the engine's drain without a word: an autoscaler's
// engine, stopped, is out of rotation by its state.
func (u *Upstream) ClearDrain() { u.undrain() }

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
