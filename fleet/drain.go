package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Drain states, as /mlc/engines and caddy_mlc_engine_drain_state show
// them (0: in rotation).
const (
	DrainDraining = "draining" // out of rotation, attempts still on it
	DrainDrained  = "drained"  // out of rotation, nothing on it
)

// ErrNoEngine is returned for an address that no live router uses.
var ErrNoEngine = errors.New("no engine at that address")

// drain is an operator's drain of one engine: out of rotation, the
// attempts on it run on there until the grace ends, then move, exactly,
// to other engines (router.Upstream.MoveAttempts).
type drain struct {
	mu    sync.Mutex
	gen   uint64 // the current drain: an older drain's timer does nothing
	timer *time.Timer
	// stopWatch ends the watch that shows the engine drained once
	// nothing runs on it.
	stopWatch context.CancelFunc
}

// Drain takes engine i out of rotation: no new attempt goes to it from
// now on; attempts on it run on for grace, then move, exactly, to other
// engines. A Drain of a draining engine restarts its grace; a grace of 0
// moves them at once.
func (f *Fleet) Drain(i int, grace time.Duration) {
	u, d := f.Upstreams()[i], &f.drains[i]
	d.mu.Lock()
	d.gen++
	gen := d.gen
	d.stop()
	u.TakeOut()
	if grace > 0 {
		d.timer = time.AfterFunc(grace, func() { f.endGrace(i, gen) })
	}
	var ctx context.Context
	ctx, d.stopWatch = context.WithCancel(context.Background())
	d.mu.Unlock()
	f.Log().Info("engine draining", zap.String("engine", u.Addr()), zap.Duration("grace", grace), zap.Int64("in_flight", u.InFlight()))
	f.publishDrain(u)
	goroutine.Go(f.Log(), "engine drain watch", func() {
		if u.WaitIdle(ctx) == nil {
			f.publishDrain(u)
		}
	}, nil)
	if grace <= 0 {
		f.endGrace(i, gen)
	}
}

// Undrain puts a drained (or draining) engine i back in rotation.
func (f *Fleet) Undrain(i int) {
	f.undrain(i)
	f.Log().Info("engine back in rotation", zap.String("engine", f.Upstreams()[i].Addr()))
}

// undrain ends engine i's drain, without a word: an autoscaler's
// engine, stopped, is out of rotation by its state.
func (f *Fleet) undrain(i int) {
	u, d := f.Upstreams()[i], &f.drains[i]
	d.mu.Lock()
	d.gen++
	d.stop()
	u.PutBack()
	d.mu.Unlock()
	f.publishDrain(u)
}

// stop ends the drain's timer and watch; the caller holds d.mu.
func (d *drain) stop() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.stopWatch != nil {
		d.stopWatch()
		d.stopWatch = nil
	}
}

// endGrace ends the grace of drain gen of engine i: every attempt still
// on it moves to another engine.
func (f *Fleet) endGrace(i int, gen uint64) {
	defer goroutine.Recover(f.Log(), "engine drain", nil)
	u, d := f.Upstreams()[i], &f.drains[i]
	d.mu.Lock()
	current := d.gen == gen && u.OutOfRotation()
	d.mu.Unlock()
	if !current {
		return // undrained, or drained again with another grace
	}
	if n := u.MoveAttempts(); n > 0 {
		f.Log().Info("drain grace over: moving the attempts on the engine to others", zap.String("engine", u.Addr()), zap.Int("attempts", n))
	}
}

// drainState is u's drain state: "" in rotation, DrainDraining or
// DrainDrained.
func drainState(u *router.Upstream) string {
	switch {
	case !u.OutOfRotation():
		return ""
	case u.InFlight() > 0:
		return DrainDraining
	}
	return DrainDrained
}

// publishDrain sets u's caddy_mlc_engine_drain_state.
func (f *Fleet) publishDrain(u *router.Upstream) {
	v := 0.0
	switch drainState(u) {
	case DrainDraining:
		v = 1
	case DrainDrained:
		v = 2
	}
	scaleMetricsOf().drainState.WithLabelValues(u.Addr()).Set(v)
}

// drainSlack bounds, past a drain's grace, the wait for the attempts
// moved off an engine to let go of it: a call in flight there ends
// within the engine timeout.
const drainSlack = time.Minute

// WaitDrained waits until nothing runs on engine i any more, after a
// Drain of grace: at most the grace and drainSlack.
func (f *Fleet) WaitDrained(ctx context.Context, i int, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace+drainSlack)
	defer cancel()
	return f.Upstreams()[i].WaitIdle(ctx)
}

// enginesAt returns the engines at addr that the live routers use, with
// their fleets: one, or, in the moment of a reload, one per fleet that
// has it.
func (lc *Lifecycle) enginesAt(addr string) []*router.Upstream {
	var out []*router.Upstream
	for _, r := range lc.routers.Routers() {
		for _, u := range r.Engines() {
			if u.Addr() == addr && !slices.Contains(out, u) && Of(u.Pool()) != nil {
				out = append(out, u)
			}
		}
	}
	return out
}

// DrainEngine drains the engine at addr (Fleet.Drain) for grace, or,
// when grace is negative, for its fleet's drain grace (Caddy's
// grace_period, else DefaultDrainGrace).
func (lc *Lifecycle) DrainEngine(addr string, grace time.Duration) error {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	for _, u := range us {
		f := Of(u.Pool())
		g := grace
		if g < 0 {
			g = f.Grace()
		}
		f.Drain(u.Index(), g)
	}
	return nil
}

// UndrainEngine puts the engine at addr back in rotation.
func (lc *Lifecycle) UndrainEngine(addr string) error {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	for _, u := range us {
		Of(u.Pool()).Undrain(u.Index())
	}
	return nil
}

// EngineDrainState is the drain state of the engine at addr: "",
// DrainDraining or DrainDrained.
func (lc *Lifecycle) EngineDrainState(addr string) (string, error) {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return "", fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	st := ""
	for _, u := range us {
		if s := drainState(u); s == DrainDraining || st == "" {
			st = s
		}
	}
	return st, nil
}
