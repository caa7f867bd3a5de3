package engine

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// ErrExternal is returned by Restart for an engine the fleet does not run.
var ErrExternal = errors.New("external engine: the fleet does not run it")

// Restart stops engine i's process (SIGTERM, SIGKILL after the stop
// grace) and has its supervisor start it again at once, with the same
// command line, environment and NVSHMEM world: a rolling restart, for
// an engine upgraded on disk. Whoever routes to the engine drains it
// first. Restart returns once the new process is ready; an error when
// ctx ends first, when the engine has no process to restart, or when the
// fleet stops. A restart counts in Restarts, as after a crash.
func (f *Fleet) Restart(ctx context.Context, i int) error {
	e := f.engines[i]
	if e.ep.External {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), ErrExternal)
	}
	p := e.current()
	if p == nil || p.reaped() {
		st, _ := e.status()
		return fmt.Errorf("engine %s has no process to restart (%s)", e.ep.Addr(), st)
	}
	e.logger().Info("restarting engine on request", zap.Int("pid", p.pid))
	e.restartAsked.Store(true)
	p.stop(f.settings().StopGrace)
	return f.readyAgain(ctx, e, p.pid)
}
