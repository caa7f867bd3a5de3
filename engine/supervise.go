package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// engine is one endpoint of a fleet and the goroutine that keeps it up.
type engine struct {
	f   *Fleet
	i   int
	ep  Endpoint
	log *zap.Logger

	program string // set by prepare
	args    []string
	env     []string

	mu       sync.Mutex
	state    State
	restarts int
	proc     *process

	lastServed atomic.Int64 // unix nanoseconds of the last Served report
}

func newEngine(f *Fleet, i int, ep Endpoint) *engine {
	return &engine{f: f, i: i, ep: ep, log: f.log.With(zap.String("engine", ep.Addr()))}
}

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

func (e *engine) getState() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

func (e *engine) status() (State, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	pid := 0
	if e.proc != nil {
		pid = e.proc.pid
	}
	return e.state, pid
}

func (e *engine) served() { e.lastServed.Store(time.Now().UnixNano()) }

func (e *engine) getRestarts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.restarts
}

func (e *engine) pid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil {
		return 0
	}
	return e.proc.pid
}

// setState records a new state and tells the fleet's watchers. Only the
// engine's own goroutine calls it, so hooks see changes in order.
func (e *engine) setState(s State) {
	e.mu.Lock()
	old := e.state
	e.state = s
	e.mu.Unlock()
	if old == s {
		return
	}
	e.log.Debug("engine state", zap.Stringer("from", old), zap.Stringer("to", s))
	e.f.notify()
	if hook := e.f.opts.OnStateChange; hook != nil {
		hook(e.i, old, s)
	}
}

func (e *engine) setProc(p *process) {
	e.mu.Lock()
	e.proc = p
	e.mu.Unlock()
}

// run starts a spawned engine, reports the outcome of its first start on
// initial, then supervises it until ctx is done.
func (e *engine) run(startCtx, ctx context.Context, initial chan<- error) {
	e.setState(StateStarting)
	err := e.launch(startCtx)
	switch {
	case err == nil:
		// Ready before Start learns of it: whoever Start returns to may
		// route to the engine at once.
		e.setState(StateReady)
	case errors.Is(err, context.Canceled):
		e.setState(StateStopped) // Stop, or another engine failed
	default:
		e.setState(StateFailed)
	}
	initial <- err
	if err == nil {
		e.supervise(ctx)
	}
}

// launch spawns the engine and waits until it is ready. On failure no
// process is left.
func (e *engine) launch(ctx context.Context) error {
	t0 := time.Now()
	if err := checkPortFree(e.ep); err != nil {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
	}
	p, err := startProcess(e.f.sp, procConfig{program: e.program, args: e.args, env: e.env, logger: e.log})
	if err != nil {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
	}
	e.setProc(p)
	err = waitReady(ctx, e.f.client, e.ep.URL(), e.f.spec.StartupTimeout, p.exited)
	if err == nil {
		e.f.readyLog(e.i, time.Since(t0))
		return nil
	}
	defer e.setProc(nil)
	if errors.Is(err, errExited) {
		p.signalGroup(syscall.SIGKILL) // whatever it left behind
		return fmt.Errorf("engine %s exited before it was ready: %w", e.ep.Addr(), p.exitError())
	}
	p.stop(e.f.spec.StopGrace)
	if errors.Is(err, ErrStartupTimeout) {
		return fmt.Errorf("engine %s: %w%s", e.ep.Addr(), err, p.quoteTail())
	}
	return fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
}

// supervise keeps a ready engine up until ctx is done: it health-checks
// it and restarts it with backoff when its process exits.
func (e *engine) supervise(ctx context.Context) {
	var b backoff
	for {
		e.setState(StateReady)
		up := time.Now()
		if !e.monitor(ctx) {
			return
		}
		if time.Since(up) >= backoffReset {
			b.reset()
		}
		if !e.restart(ctx, &b) {
			return
		}
	}
}

// monitor health-checks the running engine. It returns true when the
// process has exited, false when ctx is done (after stopping it).
func (e *engine) monitor(ctx context.Context) bool {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	h := healthWatch{e: e}
	tick := time.NewTicker(e.f.spec.HealthInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.exited:
			p.signalGroup(syscall.SIGKILL) // leftovers would hold the port and GPUs
			e.setProc(nil)
			e.log.Error("engine exited", zap.Error(p.exitError()))
			return true
		case <-ctx.Done():
			e.shutdown(p)
			return false
		case <-tick.C:
			h.check(ctx)
		}
	}
}

// shutdown stops the engine's process and marks it stopped.
func (e *engine) shutdown(p *process) {
	p.stop(e.f.spec.StopGrace)
	e.setProc(nil)
	e.setState(StateStopped)
}

// restart relaunches a dead engine, waiting out the backoff before every
// attempt. It returns false when ctx is done first.
func (e *engine) restart(ctx context.Context, b *backoff) bool {
	e.setState(StateRestarting)
	for {
		d := b.delay()
		e.log.Info("restarting engine", zap.Duration("backoff", d))
		if !sleep(ctx, d) {
			e.setState(StateStopped)
			return false
		}
		e.mu.Lock()
		e.restarts++
		e.mu.Unlock()
		err := e.launch(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			e.setState(StateStopped)
			return false
		}
		e.log.Error("engine restart failed", zap.Error(err))
	}
}

// sleep waits d, or returns false when ctx is done first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
