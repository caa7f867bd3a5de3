package router

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// errEngineDrained is the cause an attempt is cancelled with when its
// engine's attempts are moved (MoveAttempts: the end of a drain's grace):
// the retry loop resumes it on another engine from the text delivered, as
// after a preemption, blaming nobody.
var errEngineDrained = errors.New("engine drained: the attempt moves to another engine")

// rotation is whether the routers give an engine new attempts, and the
// attempts it has: package fleet's drains take an engine out (TakeOut),
// move what runs there (MoveAttempts) and put it back (PutBack). running
// holds the cancel of every attempt's context on the engine, from
// lease.bind to the lease's release: what MoveAttempts cancels.
type rotation struct {
	out  atomic.Bool // pick's check, without the lock
	idle notifier    // notified when the engine's in-flight count drops to 0

	mu      sync.Mutex
	moving  bool // attempts bound now move at once (a pick that raced MoveAttempts)
	running map[*lease]context.CancelCauseFunc
}

// TakeOut takes the engine out of rotation: no new attempt goes to it;
// those on it run on.
func (u *Upstream) TakeOut() {
	u.rotation.out.Store(true)
	u.pool.Wake()
}

// PutBack puts the engine back in rotation.
func (u *Upstream) PutBack() {
	r := &u.rotation
	r.mu.Lock()
	r.out.Store(false)
	r.moving = false
	r.mu.Unlock()
	u.pool.Wake()
}

// OutOfRotation reports that the engine takes no new attempt.
func (u *Upstream) OutOfRotation() bool { return u.rotation.out.Load() }

// MoveAttempts cancels every attempt on an engine out of rotation with
// errEngineDrained, and every one bound to it later until PutBack: each
// resumes on another engine; its lease's release gives its hold back,
// and the engine, its stream closed, frees the KV (a reservation is
// given back, see releaseReservation). It returns how many it moved.
func (u *Upstream) MoveAttempts() int {
	r := &u.rotation
	r.mu.Lock()
	r.moving = r.out.Load()
	cancels := slices.Collect(maps.Values(r.running))
	r.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errEngineDrained)
	}
	return len(cancels)
}

// WaitIdle waits until nothing runs on the engine, or ctx ends.
func (u *Upstream) WaitIdle(ctx context.Context) error {
	for {
		idle := u.rotation.idle.wait()
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

// bind returns the context of the attempt's calls on the lease's engine:
// MoveAttempts cancels it with errEngineDrained, until the lease is
// released. An engine whose attempts move already cancels it at once (a
// pick that raced the move).
func (l *lease) bind(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	r := &l.rotation
	r.mu.Lock()
	if r.running == nil {
		r.running = map[*lease]context.CancelCauseFunc{}
	}
	r.running[l] = cancel
	moved := r.out.Load() && r.moving
	r.mu.Unlock()
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
	r := &l.rotation
	r.mu.Lock()
	delete(r.running, l)
	r.mu.Unlock()
	l.cancel(nil)
}
