package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// engine is one endpoint of a fleet and the goroutine that keeps it up.
type engine struct {
	f  *Fleet
	i  int
	ep Endpoint // its host, port, GPUs and external flag never change

	logp atomic.Pointer[zap.Logger] // the fleet's logger, with the engine's name

	program string // set by prepare
	args    []string
	env     []string

	// mu guards the state and the process together: every change of the
	// process is made with the state it implies, in one locked update, so
	// that no reader sees a ready engine without a process.
	mu       sync.Mutex
	state    State
	since    time.Time // when state began
	restarts int
	proc     *process

	lastServed atomic.Int64 // unix nanoseconds of the last Served report
	// restartAsked: Restart stopped the process; its supervisor starts
	// it again at once, without the backoff of a crash.
	restartAsked atomic.Bool
	// life is the engine's supervision, which StopEngine and StartEngine
	// end and begin again (park.go).
	life lifecycle
}

func newEngine(f *Fleet, i int, ep Endpoint) *engine {
	e := &engine{f: f, i: i, ep: ep}
	e.setLogger(f.logger())
	return e
}

// logger returns the fleet's current logger, named for this engine. Every
// goroutine of the engine, its output readers included, logs through it,
// so that a reconfigured fleet logs to the new configuration's outputs.
func (e *engine) logger() *zap.Logger { return e.logp.Load() }

func (e *engine) setLogger(l *zap.Logger) { e.logp.Store(l.With(zap.String("engine", e.ep.Addr()))) }

// prepare computes the command line and environment of a spawned engine.
// Restarts reuse them, so a restarted engine rejoins the same world.
func (e *engine) prepare(uid []int) error {
	if e.ep.External {
		return nil
	}
	env, err := e.f.spec.Env(e.i, uid)
	if err != nil {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
	}
	e.program, e.args = e.f.spec.Command(e.i)
	e.env = env
	return nil
}

// status returns the state and the PID together. A process that has been
// reaped has no PID, and an engine whose process has been reaped is not
// ready even in the instant before its supervisor records the exit: it
// reads as restarting, which is what the supervisor is about to say.
func (e *engine) status() (State, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil {
		return e.state, 0
	}
	if e.proc.reaped() {
		if e.state == StateReady || e.state == StateUnhealthy {
			return StateRestarting, 0
		}
		return e.state, 0
	}
	return e.state, e.proc.pid
}

func (e *engine) current() *process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc
}

func (e *engine) served() { e.lastServed.Store(time.Now().UnixNano()) }

// lastServedAt returns when the router last reported work of the engine,
// or the zero time.
func (e *engine) lastServedAt() time.Time {
	if ns := e.lastServed.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (e *engine) getRestarts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restarts
}

func (e *engine) countRestart() {
	e.mu.Lock()
	e.restarts++
	e.mu.Unlock()
}

// setState records a new state, keeping the process.
func (e *engine) setState(s State) {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	e.set(s, p)
}

// setProc records a new process, keeping the state.
func (e *engine) setProc(p *process) {
	e.mu.Lock()
	s := e.state
	e.mu.Unlock()
	e.set(s, p)
}

// set records the state and the process in one locked update and tells
// the fleet's watchers. Only the engine's own goroutine calls it, so hooks
// see changes in order.
func (e *engine) set(s State, p *process) {
	e.mu.Lock()
	old, oldProc := e.state, e.proc
	e.state, e.proc = s, p
	if old != s {
		e.since = time.Now()
	}
	e.mu.Unlock()
	if old == s && oldProc == p {
		return
	}
	e.f.notify()
	if old == s {
		return
	}
	e.logger().Debug("engine state", zap.Stringer("from", old), zap.Stringer("to", s))
	if hook := e.f.opts.OnStateChange; hook != nil {
		hook(e.i, old, s)
	}
}
