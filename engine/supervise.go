package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"go.uber.org/zap"
)

// run starts a spawned engine, reports the outcome of its first start on
// initial, then supervises it until ctx is done.
//
// A panic in supervision is logged and supervision resumes after a
// backoff, from what the engine is doing: a live process is health-checked
// again, a dead or missing one restarted. An engine is never left without
// a supervisor while the fleet runs. A panic before the first start is
// reported fails that start.
func (e *engine) run(startCtx, ctx context.Context, initial chan<- error) {
	reported := false
	report := func(err error) {
		reported = true
		initial <- err
	}
	b := restartBackoff()
	for {
		panicked := goroutine.Call(e.logger, "engine supervision", func() {
			if !reported {
				err := e.start(startCtx)
				report(err)
				if err != nil {
					return
				}
			}
			e.supervise(ctx)
		})
		switch {
		case !panicked:
			return
		case !reported:
			e.abandon(StateFailed)
			report(fmt.Errorf("engine %s: supervision panicked while starting it", e.ep.Addr()))
			return
		case b.Wait(ctx) != nil:
			e.abandon(StateStopped)
			return
		}
		e.logger().Warn("resuming the supervision of the engine after a panic")
	}
}

// start launches the engine for the fleet's Start.
func (e *engine) start(ctx context.Context) error {
	e.set(StateStarting, nil)
	p, err := e.launch(ctx)
	switch {
	case err == nil:
		// Ready before Start learns of it: whoever Start returns to may
		// route to the engine at once.
		e.set(StateReady, p)
	case errors.Is(err, context.Canceled):
		e.set(StateStopped, nil) // Stop, or another engine failed
	default:
		e.set(StateFailed, nil)
	}
	return err
}

// abandon stops whatever process the engine has and records s.
func (e *engine) abandon(s State) {
	if p := e.current(); p != nil {
		p.stop(e.f.settings().StopGrace)
	}
	e.set(s, nil)
}

// launch spawns the engine and waits until it is ready. The engine's state
// is the caller's; its process is recorded as soon as it runs. On failure
// no process is left.
func (e *engine) launch(ctx context.Context) (*process, error) {
	t0 := time.Now()
	if err := checkPortFree(e.ep); err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
	}
	p, err := startProcess(e.f.launch.sp, procConfig{program: e.program, args: e.args, env: e.env, logger: e.logger})
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
	}
	e.setProc(p)
	err = e.waitReady(ctx, p, t0)
	if err == nil {
		e.f.launch.readyLog(e.i, time.Since(t0))
		return p, nil
	}
	switch {
	case errors.Is(err, errExited):
		p.signalGroup(syscall.SIGKILL) // whatever it left behind
		return nil, fmt.Errorf("engine %s exited before it was ready: %w", e.ep.Addr(), p.exitError())
	case errors.Is(err, errExitedWhenReady):
		p.signalGroup(syscall.SIGKILL)
		return nil, fmt.Errorf("engine %s exited as it became ready (does another process answer on its port?): %w",
			e.ep.Addr(), p.exitError())
	}
	p.stop(e.f.settings().StopGrace)
	if errors.Is(err, ErrStartupTimeout) {
		return nil, fmt.Errorf("engine %s: %w%s", e.ep.Addr(), err, p.quoteTail())
	}
	return nil, fmt.Errorf("engine %s: %w", e.ep.Addr(), err)
}

// supervise keeps an engine up until ctx is done: it health-checks its
// process and restarts it with backoff when the process exits (or is
// killed as hung). Without a process it restarts one first.
func (e *engine) supervise(ctx context.Context) {
	b := restartBackoff()
	for {
		if p := e.current(); p != nil {
			up := time.Now()
			if !e.monitor(ctx, p) {
				return
			}
			if time.Since(up) >= backoffReset {
				b.Reset()
			}
		}
		asked := e.restartAsked.Swap(false)
		if asked {
			b.Reset()
		}
		if !e.restart(ctx, b, asked) {
			return
		}
	}
}

// monitor health-checks the running engine. It returns true when the
// process has exited, false when ctx is done (after stopping it).
func (e *engine) monitor(ctx context.Context, p *process) bool {
	if !e.watch(ctx, p) {
		e.shutdown(p)
		return false
	}
	p.signalGroup(syscall.SIGKILL) // leftovers would hold the port and GPUs
	e.set(StateRestarting, nil)
	if e.restartAsked.Load() {
		e.logger().Info("engine stopped for a restart", zap.Int("pid", p.pid))
		return true
	}
	e.logger().Error("engine exited", zap.Error(p.exitError()))
	return true
}

// shutdown stops the engine's process and marks it stopped: out of
// rotation at once, without a process once it is gone.
func (e *engine) shutdown(p *process) {
	e.set(StateStopped, p)
	p.stop(e.f.settings().StopGrace)
	e.set(StateStopped, nil)
}

// restart relaunches a dead engine, waiting out the backoff before every
// attempt but, when asked (Restart), the first. It returns false when ctx
// is done first.
func (e *engine) restart(ctx context.Context, b *backoff.Backoff, asked bool) bool {
	e.set(StateRestarting, nil)
	for first := true; ; first = false {
		d := b.Next()
		if asked && first {
			d = 0
		}
		e.logger().Info("restarting engine", zap.Duration("backoff", d))
		if backoff.Sleep(ctx, d) != nil {
			e.set(StateStopped, nil)
			return false
		}
		e.countRestart()
		p, err := e.launch(ctx)
		if err == nil {
			e.set(StateReady, p)
			return true
		}
		e.set(StateRestarting, nil)
		if ctx.Err() != nil {
			e.set(StateStopped, nil)
			return false
		}
		e.logger().Error("engine restart failed", zap.Error(err))
	}
}
