package router

import (
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
)

// Circuit breaker settings. An engine whose calls fail breakerThreshold
// times in a row, with no success between, is taken out of rotation for a
// cool-down that starts at breakerMinCooldown and doubles with every
// failed trial up to breakerMaxCooldown; after the cool-down one trial
// request goes through (half-open), and its outcome closes or reopens the
// breaker. The numbers are Caddy's passive health check defaults in
// spirit (max_fails, fail_duration): a single broken stream never takes an
// engine out, three in a row do, for about a second.
const (
	breakerThreshold   = 3
	breakerMinCooldown = time.Second
	breakerMaxCooldown = 16 * time.Second
)

var breakerCooldown = backoff.Backoff{Min: breakerMinCooldown, Max: breakerMaxCooldown}

// breakerState is where a breaker is.
type breakerState int

const (
	breakerClosed   breakerState = iota // calls go through
	breakerOpen                         // cooling down; calls only when nothing else is left
	breakerHalfOpen                     // cooled down; one trial call may go
)

var breakerStateNames = [...]string{"closed", "open", "half-open"}

func (s breakerState) String() string { return breakerStateNames[s] }

// breaker is one engine's circuit breaker. It is passive health checking:
// it learns only from the router's own calls, and complements the fleet's
// active probes, which cannot tell a slow engine from a stuck one. The
// breaker of a restarted engine starts closed: pid is the process it
// judged.
type breaker struct {
	mu        sync.Mutex
	failures  int // in a row
	openUntil time.Time
	opens     int       // the first opening and the failed trials since a reset
	trial     time.Time // when the half-open trial in flight began; zero when none
	pid       int
	now       func() time.Time // tests
}

// state returns the breaker's state for the engine's process pid.
func (b *breaker) state(pid int) breakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stateLocked(pid)
}

func (b *breaker) stateLocked(pid int) breakerState {
	if pid != b.pid {
		// Another process: what the old one did says nothing about it.
		b.reset(pid)
	}
	switch {
	case b.failures < breakerThreshold:
		return breakerClosed
	case b.clock().Before(b.openUntil) || b.trialPending():
		return breakerOpen
	}
	return breakerHalfOpen
}

// admit reports whether a call may go to the engine now as a regular
// choice, and claims the half-open trial when it is the engine's turn.
func (b *breaker) admit(pid int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.stateLocked(pid) {
	case breakerClosed:
		return true
	case breakerHalfOpen:
		b.trial = b.clock()
		return true
	}
	return false
}

// success records a call the engine answered.
func (b *breaker) success(pid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pid == b.pid || b.pid == 0 {
		b.reset(pid)
	}
}

// failure records a call the engine failed, and reports whether it opened
// the breaker.
func (b *breaker) failure(pid int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pid != b.pid {
		b.reset(pid)
	}
	b.failures++
	if b.failures < breakerThreshold {
		return false
	}
	wasTrial := !b.trial.IsZero()
	b.trial = time.Time{}
	// A failure while open, not the trial's, keeps the cool-down: only a
	// failed trial lengthens it.
	if b.opens == 0 || wasTrial {
		b.opens++
	}
	b.openUntil = b.clock().Add(breakerCooldown.Attempt(b.opens))
	return b.failures == breakerThreshold || wasTrial
}

// forgive takes back the last failure recorded for pid: it turned out to
// be another engine's (a remote_send that waited on a frozen decode
// engine). A breaker it had opened closes again.
func (b *breaker) forgive(pid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pid != b.pid || b.failures == 0 {
		return
	}
	b.failures--
	if b.failures < breakerThreshold {
		b.openUntil, b.trial = time.Time{}, time.Time{}
	}
}

// badness orders open breakers for a last-resort choice: fewer failures
// in a row, then the one that reopens soonest.
func (b *breaker) badness() (int, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures, b.openUntil
}

// trialPending reports a half-open trial in flight. A trial that never
// reported (its client left before the engine answered) stops counting
// after breakerMaxCooldown, so the engine gets another.
func (b *breaker) trialPending() bool {
	return !b.trial.IsZero() && b.clock().Sub(b.trial) < breakerMaxCooldown
}

func (b *breaker) reset(pid int) {
	b.failures, b.openUntil, b.opens, b.trial, b.pid = 0, time.Time{}, 0, time.Time{}, pid
}

func (b *breaker) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}
