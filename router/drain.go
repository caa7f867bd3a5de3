package router

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// errEngineDrained is the cause an attempt is cancelled with when the
// grace of its engine's drain ends: the retry loop resumes it on another
// engine from the text delivered, as after a preemption, blaming nobody.
var errEngineDrained = errors.New("engine drained: the attempt moves to another engine")

// Drain states, as /mlc/engines and caddy_mlc_engine_drain_state show
// them (0: in rotation).
const (
	DrainDraining = "draining" // out of rotation, attempts still on it
	DrainDrained  = "drained"  // out of rotation, nothing on it
)

// drainState is an engine an operator took out of rotation (Drain): no
// new attempt is given it; those on it run on there until the grace
// ends, then move to other engines. running holds the cancel of every
// attempt's context on the engine, from lease.bind to the lease's
// release: what a drain's end cancels.
type drainState struct {
	on   atomic.Bool // pick's check, without the lock
	idle notifier    // notified when the engine's in-flight count drops to 0

	mu      sync.Mutex
	expired bool   // the grace ended: attempts still on it move
	gen     uint64 // the current drain: an older drain's timer does nothing
	timer   *time.Timer
	running map[*lease]context.CancelCauseFunc
}

// Drain takes the engine out of rotation: no new attempt goes to it from
// now on; attempts on it run on for grace, then move, exactly, to other
// engines (see migrate). A Drain of a draining engine restarts its
// grace; a grace of 0 moves them at once.
func (u *Upstream) Drain(grace time.Duration) {
	d := &u.drain
	d.mu.Lock()
	d.on.Store(true)
	d.gen++
	gen := d.gen
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if grace > 0 {
		d.expired = false
		d.timer = time.AfterFunc(grace, func() { u.migrate(gen) })
	}
	d.mu.Unlock()
	u.fleet.Log().Info("engine draining", addrField(u), zap.Duration("grace", grace), zap.Int64("in_flight", u.inflight.Load()))
	u.fleet.wake()
	if grace <= 0 {
		u.migrate(gen)
	}
	u.publishDrain()
}

// Undrain puts a drained (or draining) engine back in rotation.
func (u *Upstream) Undrain() {
	u.undrain()
	u.fleet.Log().Info("engine back in rotation", addrField(u))
}

// undrain ends the engine's drain, without a word: an autoscaler's
// engine, stopped, is out of rotation by its state.
func (u *Upstream) undrain() {
	d := &u.drain
	d.mu.Lock()
	d.on.Store(false)
	d.expired = false
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
	u.publishDrain()
	u.fleet.wake()
}

// draining reports that the engine takes no new attempt.
func (u *Upstream) draining() bool { return u.drain.on.Load() }

// drainStatus is the engine's drain state: "" in rotation, DrainDraining
// or DrainDrained.
func (u *Upstream) drainStatus() string {
	switch {
	case !u.draining():
		return ""
	case u.inflight.Load() > 0:
		return DrainDraining
	}
	return DrainDrained
}

// migrate ends the grace of drain gen: every attempt still on the engine
// is cancelled with errEngineDrained, and resumes on another engine; its
// lease's release gives its hold back, and the engine, its stream closed,
// frees the KV (a reservation is given back, see releaseReservation).
func (u *Upstream) migrate(gen uint64) {
	defer goroutine.Recover(u.fleet.Log(), "engine drain", nil)
	d := &u.drain
	d.mu.Lock()
	if !d.on.Load() || d.gen != gen {
		d.mu.Unlock()
		return // undrained, or drained again with another grace
	}
	d.expired = true
	d.mu.Unlock()
	if n := u.MoveAttempts(); n > 0 {
		u.fleet.Log().Info("drain grace over: moving the attempts on the engine to others", addrField(u), zap.Int("attempts", n))
	}
}

// MoveAttempts cancels every attempt on the engine with errEngineDrained:
// each resumes on another engine. It returns how many it moved.
func (u *Upstream) MoveAttempts() int {
	d := &u.drain
	d.mu.Lock()
	cancels := slices.Collect(maps.Values(d.running))
	d.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errEngineDrained)
	}
	return len(cancels)
}

// drainSlack bounds, past a drain's grace, the wait for the attempts
// moved off an engine to let go of it: a call in flight there ends
// within the engine timeout.
const drainSlack = time.Minute

// WaitDrained waits until nothing runs on the engine any more, after a
// Drain of grace: at most the grace and drainSlack.
func (u *Upstream) WaitDrained(ctx context.Context, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace+drainSlack)
	defer cancel()
	for {
		idle := u.drain.idle.wait()
		if u.inflight.Load() <= 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// publishDrain sets the engine's caddy_mlc_engine_drain_state. Under the
// lock, so that the last of two racing updates reads the latest counts.
func (u *Upstream) publishDrain() {
	u.drain.mu.Lock()
	defer u.drain.mu.Unlock()
	v := 0.0
	switch u.drainStatus() {
	case DrainDraining:
		v = 1
	case DrainDrained:
		v = 2
	}
	sharedMetrics().drainState.WithLabelValues(u.addr).Set(v)
}

// bind returns the context of the attempt's calls on the lease's engine:
// the end of a drain's grace cancels it with errEngineDrained, until the
// lease is released. An engine whose grace is over already cancels it at
// once (a pick that raced the drain).
func (l *lease) bind(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	d := &l.drain
	d.mu.Lock()
	if d.running == nil {
		d.running = map[*lease]context.CancelCauseFunc{}
	}
	d.running[l] = cancel
	moved := d.on.Load() && d.expired
	d.mu.Unlock()
	l.cancel = cancel
	if moved {
		cancel(errEngineDrained)
	}
	return ctx
}

// unbind takes the lease's attempt off the engine's registry (release).
func (l *lease) unbind() {
	if l.cancel == nil {
		return
	}
	d := &l.drain
	d.mu.Lock()
	delete(d.running, l)
	d.mu.Unlock()
	l.cancel(nil)
}
