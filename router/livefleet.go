package router

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// DefaultDrainGrace bounds how long the engines of a fleet that no config
// uses any more keep serving the streams they have, when Caddy's
// grace_period is not set: long enough for most completions to end where
// they run; a stream still running after it is resumed on the new engines
// (exactly, as after a preemption), so a short grace costs a second
// prefill, never a dropped request.
const DefaultDrainGrace = 30 * time.Second

// LiveFleet is a fleet of engines and what the routers know of them. The
// mlc app keeps it in the fleets UsagePool, shared by every config that
// has the same engines: a reload that keeps the engines keeps it, with
// its counts and breakers. When no config holds it any more it retires
// (fleet.Retire): new work goes to the engines of the config that
// replaced it, and it stops once the streams it has are done. The
// engines' own life (start, ports, stop) is engine.Fleet's.
type LiveFleet struct {
	*engine.Fleet
	spec      engine.Spec
	upstreams []*Upstream
	live      *Live

	logger   atomic.Pointer[zap.Logger]
	grace    atomic.Int64 // drain grace, nanoseconds
	inflight atomic.Int64
	idle     notifier               // notified when inflight drops to 0
	scaler   atomic.Pointer[Scaler] // nil: every spawned engine runs
}

// NewLiveFleet makes the fleet of spec, its engines not started yet.
func NewLiveFleet(live *Live, spec engine.Spec, log *zap.Logger) (*LiveFleet, error) {
	f, err := engine.New(spec, engine.Options{Logger: log,
		OnStateChange: func(int, engine.State, engine.State) { live.changes.notify() }})
	if err != nil {
		return nil, fmt.Errorf("mlc: %w", err)
	}
	lf := &LiveFleet{Fleet: f, spec: spec, live: live}
	lf.logger.Store(log)
	lf.grace.Store(int64(DefaultDrainGrace))
	starts := spec.DeviceIDStarts()
	for i, ep := range spec.Endpoints {
		u := &Upstream{fleet: lf, index: i, addr: ep.Addr(), url: ep.URL()}
		u.pe.Store(int64(starts[i]))
		lf.upstreams = append(lf.upstreams, u)
	}
	return lf, nil
}

// Log is the fleet's logger: the newest config's that holds it.
func (lf *LiveFleet) Log() *zap.Logger { return lf.logger.Load() }

// wake tells the routers waiting for an engine to look again.
func (lf *LiveFleet) wake() { lf.live.changes.notify() }

// held counts calls in flight on the whole fleet, for the drain.
func (lf *LiveFleet) held(delta int64) {
	if lf.inflight.Add(delta) == 0 {
		lf.idle.notify()
	}
}

// Launch starts the engines (engine.Fleet.Launch); routers queue
// requests until they are ready.
func (lf *LiveFleet) Launch(reload bool) error {
	err := lf.Fleet.Launch(reload, lf.ready)
	if err != nil {
		lf.wake()
	}
	return err
}

// LaunchNow starts the engines and waits until they are ready.
func (lf *LiveFleet) LaunchNow() error {
	err := lf.Fleet.LaunchNow(lf.ready)
	if err != nil {
		lf.wake()
	}
	return err
}

// ready starts what follows ready engines until they stop (ctx): their
// load and GPU polls, the autoscaler's ticks.
func (lf *LiveFleet) ready(ctx context.Context) {
	lf.Fleet.PollLoad(ctx, lf)
	lf.Fleet.PollGPUs(ctx)
	lf.tickScaler(ctx)
	lf.wake()
}

// tickScaler ticks the fleet's autoscaler, if it has spawned engines,
// until ctx ends; a reload may give it one later (SetScaler).
func (lf *LiveFleet) tickScaler(ctx context.Context) {
	if len(engine.Spawned(lf.spec.Endpoints)) == 0 {
		return
	}
	interval := func() time.Duration {
		if s := lf.Scaler(); s != nil {
			return s.Interval()
		}
		return time.Second
	}
	goroutine.Every(ctx, lf.Log(), "autoscaler", interval, func() {
		if s := lf.Scaler(); s != nil {
			s.Tick(ctx)
		}
	}, nil)
}

// failed returns the error of a start that failed, or nil.
func (lf *LiveFleet) failed() error { return lf.LaunchErr() }

// draining reports that no config holds the fleet any more.
func (lf *LiveFleet) draining() bool { return lf.Retired() }

// InFlight counts the calls in flight on the whole fleet.
func (lf *LiveFleet) InFlight() int64 { return lf.inflight.Load() }

// SetLogger makes log the fleet's logger: the newest config's (a stopped
// config's log outputs may be closed).
func (lf *LiveFleet) SetLogger(log *zap.Logger) { lf.logger.Store(log) }

// SetGrace sets how long the fleet's engines may drain.
func (lf *LiveFleet) SetGrace(d time.Duration) { lf.grace.Store(int64(d)) }

// Upstreams are the fleet's engines as the routers see them, in endpoint
// order.
func (lf *LiveFleet) Upstreams() []*Upstream { return lf.upstreams }

// Spec is what the fleet runs.
func (lf *LiveFleet) Spec() engine.Spec { return lf.spec }

// Handle is the routers' way to their fleet: empty until the config
// starts (or for a router with only discovered engines). Routers with the
// same engines share one.
type Handle struct {
	spec engine.Spec
	lf   atomic.Pointer[LiveFleet]
	// launching is the fleet while the mlc app starts it, before Set:
	// shown by /mlc/engines (its engines starting, with their PIDs),
	// never routed to.
	launching atomic.Pointer[LiveFleet]
}

// NewHandle returns an empty handle for the fleet of spec.
func NewHandle(spec engine.Spec) *Handle { return &Handle{spec: spec} }

// Spec is the fleet's spec.
func (h *Handle) Spec() engine.Spec { return h.spec }

// Set attaches the running fleet.
func (h *Handle) Set(f *LiveFleet) {
	h.lf.Store(f)
	f.wake()
}

// get returns the fleet, or nil before the config started.
func (h *Handle) get() *LiveFleet { return h.lf.Load() }

// Launching shows f, the fleet being started for the handle, in the
// engine list until Set attaches it.
func (h *Handle) Launching(f *LiveFleet) { h.launching.Store(f) }

// shown is the fleet the engine list describes: the attached one, else
// the one being started, else nil.
func (h *Handle) shown() *LiveFleet {
	if lf := h.get(); lf != nil {
		return lf
	}
	return h.launching.Load()
}

// WaitIdle waits up to d until nothing runs on the fleet; it reports
// whether nothing does.
func (lf *LiveFleet) WaitIdle(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		idle := lf.idle.wait()
		if lf.inflight.Load() <= 0 {
			return true
		}
		select {
		case <-idle:
		case <-deadline.C:
			return false
		}
	}
}

// errDraining is returned to an attempt whose router's engines drain: it
// goes to the router that replaced it.
var errDraining = errors.New("engines draining after a reload")

// ForgetPEs marks the first NVSHMEM PE of the fleet's engines unknown
// until they report it: engines a dynamic source found.
func (lf *LiveFleet) ForgetPEs() {
	for _, u := range lf.upstreams {
		u.pe.Store(-1)
	}
}
