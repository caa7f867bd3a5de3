package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// DefaultDrainGrace bounds how long the engines of a fleet that no config
// uses any more keep serving the streams they have, when Caddy's
// grace_period is not set: long enough for most completions to end where
// they run; a stream still running after it is resumed on the new engines
// (exactly, as after a preemption), so a short grace costs a second
// prefill, never a dropped request.
const DefaultDrainGrace = 30 * time.Second

// Fleet is one fleet's lifecycle: its engines' processes (engine.Fleet,
// which it is), the routers' Pool of them, its autoscaler, its drain
// grace and the operator's drains of its engines. The mlc app keeps it
// in the fleets UsagePool, shared by every config that has the same
// engines: a reload that keeps the engines keeps it, with the pool's
// counts and breakers. When no config holds it any more it retires
// (Retire): new work goes to the engines of the config that replaced it,
// and it stops once the streams it has are done.
type Fleet struct {
	*engine.Fleet
	pool   *router.Pool
	spec   engine.Spec
	grace  atomic.Int64 // drain grace, nanoseconds
	scaler atomic.Pointer[Scaler]
	drains []drain // an operator's drain of each engine, by endpoint index
}

// NewFleet makes the fleet of spec, its engines not started yet, for the
// lifecycle's routers.
func (lc *Lifecycle) NewFleet(spec engine.Spec, log *zap.Logger) (*Fleet, error) {
	live := lc.routers
	ef, err := engine.New(spec, engine.Options{Logger: log, Running: lc.running,
		OnStateChange: func(int, engine.State, engine.State) { live.EnginesChanged() }})
	if err != nil {
		return nil, fmt.Errorf("mlc: %w", err)
	}
	f := &Fleet{Fleet: ef, spec: spec, drains: make([]drain, len(spec.Endpoints))}
	f.pool = router.NewPool(live, f, spec, log)
	f.grace.Store(int64(DefaultDrainGrace))
	return f, nil
}

// Of is the fleet whose pool p is; nil for a pool package fleet did not
// make.
func Of(p *router.Pool) *Fleet {
	if p == nil {
		return nil
	}
	f, _ := p.Processes().(*Fleet)
	return f
}

// Pool is the fleet's engines as the routers see them.
func (f *Fleet) Pool() *router.Pool { return f.pool }

// Upstreams are the fleet's engines as the routers see them, in
// endpoint order.
func (f *Fleet) Upstreams() []*router.Upstream { return f.pool.Upstreams() }

// Spec is what the fleet runs.
func (f *Fleet) Spec() engine.Spec { return f.spec }

// Log is the fleet's logger: the newest config's that holds it.
func (f *Fleet) Log() *zap.Logger { return f.pool.Log() }

// SetLogger makes log the fleet's logger: the newest config's (a stopped
// config's log outputs may be closed).
func (f *Fleet) SetLogger(log *zap.Logger) { f.pool.SetLogger(log) }

// Wake tells the routers waiting for an engine to look again: one was
// started, or taken out of rotation.
func (f *Fleet) Wake() { f.pool.Wake() }

// InFlight counts the calls in flight on the whole fleet.
func (f *Fleet) InFlight() int64 { return f.pool.InFlight() }

// Grace is how long the fleet's engines may drain.
func (f *Fleet) Grace() time.Duration { return time.Duration(f.grace.Load()) }

// SetGrace sets how long the fleet's engines may drain.
func (f *Fleet) SetGrace(d time.Duration) { f.grace.Store(int64(d)) }

// Launch starts the engines (engine.Fleet.Launch); routers queue
// requests until they are ready.
func (f *Fleet) Launch(reload bool) error {
	err := f.Fleet.Launch(reload, f.ready)
	if err != nil {
		f.Wake()
	}
	return err
}

// LaunchNow starts the engines and waits until they are ready.
func (f *Fleet) LaunchNow() error {
	err := f.Fleet.LaunchNow(f.ready)
	if err != nil {
		f.Wake()
	}
	return err
}

// ready starts what follows ready engines until they stop (ctx): their
// load and GPU polls, the autoscaler's ticks.
func (f *Fleet) ready(ctx context.Context) {
	f.PollLoad(ctx, f.pool)
	f.PollGPUs(ctx)
	f.tickScaler(ctx)
	f.Wake()
}

// tickScaler ticks the fleet's autoscaler, if it has spawned engines,
// until ctx ends; a reload may give it one later (SetScaler).
func (f *Fleet) tickScaler(ctx context.Context) {
	if len(engine.Spawned(f.spec.Endpoints)) == 0 {
		return
	}
	interval := func() time.Duration {
		if s := f.Scaler(); s != nil {
			return s.Interval()
		}
		return time.Second
	}
	goroutine.Every(ctx, f.Log(), "autoscaler", interval, func() {
		if s := f.Scaler(); s != nil {
			s.Tick(ctx)
		}
	}, nil)
}

// SetScaler makes s the fleet's autoscaler.
func (f *Fleet) SetScaler(s Scaler) {
	f.scaler.Store(&s)
	f.pool.SetAsleep(s.Asleep)
}

// Scaler is the fleet's autoscaler, nil for none.
func (f *Fleet) Scaler() Scaler {
	if s := f.scaler.Load(); s != nil {
		return *s
	}
	return nil
}

// spawned are the engines the fleet runs itself and that run (not those
// its autoscaler stopped); none once it retired.
func (f *Fleet) spawned() []*router.Upstream {
	if f.Retired() {
		return nil
	}
	var out []*router.Upstream
	for _, i := range engine.Spawned(f.spec.Endpoints) {
		if !f.Parked(i) {
			out = append(out, f.Upstreams()[i])
		}
	}
	return out
}

// ForgetPEs marks the first NVSHMEM PE of the fleet's engines unknown
// until they report it: engines a dynamic source found.
func (f *Fleet) ForgetPEs() { f.pool.ForgetPEs() }
