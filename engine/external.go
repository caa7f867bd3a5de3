package engine

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// healthWatch turns health check results into Ready/Unhealthy states.
type healthWatch struct {
	e        *engine
	failures int
}

// check probes the engine once and updates its state.
func (h *healthWatch) check(ctx context.Context) {
	err := probe(ctx, h.e.f.client, h.e.ep.URL())
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if h.e.getState() != StateReady {
			h.e.log.Info("engine healthy")
		}
		h.failures = 0
		h.e.setState(StateReady)
		return
	}
	h.failures++
	if h.failures == unhealthyAfter {
		h.e.log.Warn("engine unhealthy", zap.Error(err))
		h.e.setState(StateUnhealthy)
	}
}

// watchExternal health-checks an engine that the fleet does not run, from
// Start to Stop: Starting until its first answer, then Ready or Unhealthy.
func (e *engine) watchExternal(ctx context.Context) {
	e.setState(StateStarting)
	h := healthWatch{e: e}
	tick := time.NewTicker(e.f.spec.HealthInterval)
	defer tick.Stop()
	for {
		h.check(ctx)
		select {
		case <-ctx.Done():
			e.setState(StateStopped)
			return
		case <-tick.C:
		}
	}
}
