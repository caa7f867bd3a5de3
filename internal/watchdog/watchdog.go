// Package watchdog is a timer that looks at something now and then and
// decides when to look again: the shape of a write or a call watched for
// silence, where each event only notes the time (two clock reads) and the
// timer, rather than every event, pays for a reset.
package watchdog

import (
	"sync"
	"time"
)

// A Dog calls its check after a wait; check returns the next wait, or 0
// (or less) to stop looking. The timer it runs on is set while the Dog's
// lock is held, so a check, however soon it fires, sees it: the
// time.AfterFunc shape `x.timer = time.AfterFunc(d, x.check)` with a check
// that resets x.timer reads a field that nothing orders after the
// assignment.
type Dog struct {
	mu      sync.Mutex
	timer   *time.Timer
	check   func() time.Duration
	stopped bool
}

// Start returns a Dog that calls check after wait, then after each wait
// check returns, until check returns 0 or Stop is called.
func Start(wait time.Duration, check func() time.Duration) *Dog {
	d := &Dog{check: check}
	d.mu.Lock()
	d.timer = time.AfterFunc(wait, d.fire)
	d.mu.Unlock()
	return d
}

func (d *Dog) fire() {
	d.mu.Lock()
	stopped := d.stopped
	d.mu.Unlock()
	if stopped {
		return
	}
	next := d.check()
	if next <= 0 {
		return
	}
	d.mu.Lock()
	if !d.stopped {
		d.timer.Reset(next)
	}
	d.mu.Unlock()
}

// Reset sets the next check to come after wait instead, unless the watch
// has stopped.
func (d *Dog) Reset(wait time.Duration) {
	d.mu.Lock()
	if !d.stopped {
		d.timer.Reset(wait)
	}
	d.mu.Unlock()
}

// Stop ends the watch: no check starts after it returns (one under way
// finishes, and sets no new wait).
func (d *Dog) Stop() {
	d.mu.Lock()
	d.stopped = true
	d.timer.Stop()
	d.mu.Unlock()
}
