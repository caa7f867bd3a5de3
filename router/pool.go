package router

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// Processes is what the request path reads of a fleet's engine
// processes: engine.Fleet's, whose start, supervision and stop package
// fleet owns. It is all the router knows of the engines' lifecycle.
type Processes interface {
	// Status is engine i's process state and PID.
	Status(i int) (engine.State, int)
	// Served tells the supervisor engine i answered a call (passive
	// health).
	Served(i int)
	// Done is closed once the engines stopped.
	Done() <-chan struct{}
	// LaunchErr is the error of a start that failed, or nil.
	LaunchErr() error
	// Retired reports that no config holds the fleet any more: new work
	// goes to the engines of the config that replaced it.
	Retired() bool
}

// Pool is a fleet's engines as the routers see them: one Upstream per
// endpoint, with the counts, breakers, loads and prefix indexes every
// router balances on. Like reverse_proxy's hosts, it is shared: package
// fleet makes one with each fleet and keeps it across reloads, so every
// router and every config that uses the engines shares its counts.
type Pool struct {
	procs     Processes
	upstreams []*Upstream
	live      *Live

	logger   atomic.Pointer[zap.Logger]
	inflight atomic.Int64
	idle     notifier                    // notified when inflight drops to 0
	asleep   atomic.Pointer[func() bool] // nil: never scaled to zero
}

// NewPool returns the routers' view of the engines of spec, whose
// processes are procs.
func NewPool(live *Live, procs Processes, spec engine.Spec, log *zap.Logger) *Pool {
	p := &Pool{procs: procs, live: live}
	p.logger.Store(log)
	starts := spec.DeviceIDStarts()
	for i, ep := range spec.Endpoints {
		u := &Upstream{pool: p, index: i, addr: ep.Addr(), url: ep.URL()}
		u.pe.Store(int64(starts[i]))
		p.upstreams = append(p.upstreams, u)
	}
	return p
}

// Processes are the engines' processes.
func (p *Pool) Processes() Processes { return p.procs }

// Log is the pool's logger: the newest config's that holds it.
func (p *Pool) Log() *zap.Logger { return p.logger.Load() }

// SetLogger makes log the pool's logger: the newest config's (a stopped
// config's log outputs may be closed).
func (p *Pool) SetLogger(log *zap.Logger) { p.logger.Store(log) }

// Wake tells the routers waiting for an engine to look again.
func (p *Pool) Wake() { p.live.changes.notify() }

// held counts calls in flight on the whole pool, for WaitIdle.
func (p *Pool) held(delta int64) {
	if p.inflight.Add(delta) == 0 {
		p.idle.notify()
	}
}

// failed returns the error of a start that failed, or nil.
func (p *Pool) failed() error { return p.procs.LaunchErr() }

// InFlight counts the calls in flight on the whole pool.
func (p *Pool) InFlight() int64 { return p.inflight.Load() }

// Upstreams are the engines, in endpoint order.
func (p *Pool) Upstreams() []*Upstream { return p.upstreams }

// SetAsleep gives the pool the autoscaler's word on whether its engines
// may all be scaled down (min 0): then a request starts one, and the
// router counts as ready all the same.
func (p *Pool) SetAsleep(asleep func() bool) { p.asleep.Store(&asleep) }

// isAsleep reports the autoscaler's word (SetAsleep); false without one.
func (p *Pool) isAsleep() bool {
	f := p.asleep.Load()
	return f != nil && (*f)()
}

// WaitIdle waits up to d until nothing runs on the pool; it reports
// whether nothing does.
func (p *Pool) WaitIdle(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		idle := p.idle.wait()
		if p.inflight.Load() <= 0 {
			return true
		}
		select {
		case <-idle:
		case <-deadline.C:
			return false
		}
	}
}

// ForgetPEs marks the first NVSHMEM PE of the engines unknown until they
// report it: engines a dynamic source found.
func (p *Pool) ForgetPEs() {
	for _, u := range p.upstreams {
		u.pe.Store(-1)
	}
}

var _ engine.LoadRecorder = (*Pool)(nil)

// LoadDue is engine.LoadRecorder's: the fleet's poll asks engine i now
// if pollDue says so; our in-flight count at the asking is noted.
func (p *Pool) LoadDue(i int, now time.Time) bool {
	u := p.upstreams[i]
	if !u.pollDue(now) {
		return false
	}
	u.ownAtAsk.Store(u.inflight.Load())
	return true
}

// LoadAnswered is engine.LoadRecorder's: engine i answered a poll.
func (p *Pool) LoadAnswered(i int, extra map[string]json.RawMessage) {
	p.upstreams[i].answered(extra)
}

// Handle is the routers' way to their pool: empty until the config
// starts (or for a router with only discovered engines). Routers with the
// same engines share one.
type Handle struct {
	spec engine.Spec
	pool atomic.Pointer[Pool]
	// launching is the pool while the mlc app starts its fleet, before
	// Set: shown by /mlc/engines (its engines starting, with their
	// PIDs), never routed to.
	launching atomic.Pointer[Pool]
}

// NewHandle returns an empty handle for the fleet of spec.
func NewHandle(spec engine.Spec) *Handle { return &Handle{spec: spec} }

// Spec is the fleet's spec.
func (h *Handle) Spec() engine.Spec { return h.spec }

// Set attaches the running fleet's pool.
func (h *Handle) Set(p *Pool) {
	h.pool.Store(p)
	p.Wake()
}

// get returns the pool, or nil before the config started.
func (h *Handle) get() *Pool { return h.pool.Load() }

// Launching shows p, the pool of the fleet being started for the handle,
// in the engine list until Set attaches it.
func (h *Handle) Launching(p *Pool) { h.launching.Store(p) }

// Shown is the pool the engine list describes: the attached one, else
// the one being started, else nil.
func (h *Handle) Shown() *Pool {
	if p := h.get(); p != nil {
		return p
	}
	return h.launching.Load()
}

// errDraining is returned to an attempt whose router's engines drain: it
// goes to the router that replaced it.
var errDraining = errors.New("engines draining after a reload")
