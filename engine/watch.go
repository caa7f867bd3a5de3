package engine

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"go.uber.org/zap"
)

// Health watch settings.
const (
	// unhealthyAfter is how many counted failed checks in a row take a
	// ready engine out of rotation.
	unhealthyAfter = 2
	// servedGrace, in health intervals, is how recent a Served report must
	// be to excuse a failed check: an engine busy serving may answer its
	// probes late.
	servedGrace = 2
)

// watch health-checks the engine every health interval until its process
// exits (it returns true) or ctx is done (false). p is nil for an external
// engine, which is checked at once and has no process to exit or kill.
// Probes run on their own goroutine so that an exit is seen the moment it
// happens, however slow the probe. A tick during a probe is not lost: the
// next probe starts when that one ends.
func (e *engine) watch(ctx context.Context, p *process) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var exited <-chan struct{}
	if p != nil {
		exited = p.exited
	}
	h := healthWatch{e: e, p: p, lastOK: time.Now()}
	results := make(chan error, 1)
	inFlight, due := false, false
	check := func() {
		inFlight = true
		e.f.probeAsync(wctx, e.ep.URL(), results)
	}
	interval := e.f.settings().HealthInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	if p == nil {
		check()
	}
	for {
		reconfigured := e.f.reconfigured()
		select {
		case <-exited:
			return true
		case <-ctx.Done():
			return false
		case <-reconfigured:
			if iv := e.f.settings().HealthInterval; iv != interval {
				interval = iv
				tick.Reset(iv)
			}
		case <-tick.C:
			if hook := e.f.opts.OnSuperviseTick; hook != nil {
				hook(e.i)
			}
			if inFlight {
				due = true
			} else {
				check()
			}
		case err := <-results:
			inFlight = false
			h.record(err)
			if due {
				due = false
				check()
			}
		}
	}
}

// probeAsync probes base on a new goroutine and sends the result, exactly
// once, on results.
func (f *Fleet) probeAsync(ctx context.Context, base string, results chan<- error) {
	timeout := f.settings().probeTimeout()
	f.launch.wg.Go(func() {
		var err error
		if goroutine.Call(f.logger, "engine health check", func() { err = Probe(ctx, f.client, base, timeout) }) {
			err = errors.New("health check panicked")
		}
		results <- err
	})
}

// healthWatch turns health check results and Served reports into
// Ready/Unhealthy states, and kills a spawned engine that hangs.
type healthWatch struct {
	e        *engine
	p        *process // nil for an external engine
	failures int      // counted failed checks in a row
	lastOK   time.Time
	killed   bool
}

// record takes the result of one check. A failure does not count while the
// router reports the engine serving: it is busy, not down. A spawned
// engine that answered no check and served nothing for the hang timeout is
// hung (stopped, deadlocked): it is killed, and supervision restarts it as
// after a crash.
func (h *healthWatch) record(err error) {
	e, s, now := h.e, h.e.f.settings(), time.Now()
	if err == nil {
		h.lastOK, h.failures = now, 0
		if st, _ := e.status(); st != StateReady {
			e.logger().Info("engine healthy")
			e.setState(StateReady)
		}
		return
	}
	served := e.lastServedAt()
	if now.Sub(served) < servedGrace*s.HealthInterval {
		e.logger().Debug("health check failed while the engine serves; not counted", zap.Error(err))
	} else {
		h.failures++
		if h.failures == unhealthyAfter {
			e.logger().Warn("engine unhealthy", zap.Error(err))
			e.setState(StateUnhealthy)
		}
	}
	alive := h.lastOK
	if served.After(alive) {
		alive = served
	}
	if h.p == nil || h.killed || now.Sub(alive) < s.HangTimeout {
		return
	}
	h.killed = true
	e.logger().Error("engine hung: it answered no health check and served nothing for the hang timeout; killing it",
		zap.Int("pid", h.p.pid), zap.Stringer("silent_for", now.Sub(alive).Round(time.Millisecond)),
		zap.Stringer("hang_timeout", s.HangTimeout), zap.Error(err))
	h.p.signalGroup(syscall.SIGKILL)
}

// runExternal health-checks an engine that the fleet does not run, from
// Start to Stop: Starting until its first answer, then Ready or Unhealthy.
// A panic in the checks is logged and they resume after a backoff.
func (e *engine) runExternal(ctx context.Context) {
	e.setState(StateStarting)
	b := restartBackoff()
	for goroutine.Call(e.logger, "external engine health checks", func() { e.watch(ctx, nil) }) {
		if b.Wait(ctx) != nil {
			break
		}
		e.logger().Warn("resuming the health checks of the engine after a panic")
	}
	e.setState(StateStopped)
}
