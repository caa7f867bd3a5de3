package engine

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// lifecycle is one spawned engine's supervision as a unit that can be
// stopped and started again while the fleet runs (an autoscaler's
// engine): parked engines are left stopped by Start.
type lifecycle struct {
	mu     sync.Mutex
	parked bool
	cancel context.CancelFunc // ends the engine's supervision; nil when none runs
	done   chan struct{}      // closed when the supervision goroutine ends
}

// running reports whether a supervision goroutine runs for the engine.
func (l *lifecycle) running() bool {
	if l.done == nil {
		return false
	}
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// Parked reports whether engine i is held stopped by StopEngine (or left
// stopped by Start after a StopEngine before it).
func (f *Fleet) Parked(i int) bool {
	l := &f.engines[i].life
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.parked
}

// parked counts the engines held stopped.
func (f *Fleet) parked() int {
	n := 0
	for i := range f.engines {
		if f.Parked(i) {
			n++
		}
	}
	return n
}

// StopEngine stops spawned engine i and keeps it stopped, the rest of the
// fleet running: SIGTERM, SIGKILL after the stop grace, its state
// StateStopped. Whoever routes to it drains it first. A StartEngine in
// progress is abandoned (it fails). Before Start, it only marks the engine
// to be left stopped. It returns once the process is gone.
func (f *Fleet) StopEngine(i int) error {
	e := f.engines[i]
	if e.ep.External {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), ErrExternal)
	}
	e.life.mu.Lock()
	defer e.life.mu.Unlock()
	e.life.parked = true
	if !e.life.running() {
		return nil
	}
	e.logger().Info("stopping engine on request")
	e.life.cancel()
	<-e.life.done
	return nil
}

// StartEngine starts spawned engine i again after StopEngine, with the
// command line, environment and NVSHMEM world it always has, and returns
// once it is ready (at once if it runs and is ready). A start that fails
// or outlives ctx leaves it stopped, with an error. Before Start, it only
// unmarks it: Start starts it with the others.
func (f *Fleet) StartEngine(ctx context.Context, i int) error {
	e := f.engines[i]
	if e.ep.External {
		return fmt.Errorf("engine %s: %w", e.ep.Addr(), ErrExternal)
	}
	return f.launch.startEngine(ctx, e)
}

// readyAgain waits until engine e is ready with a process other than
// old (0: any), while its supervision runs.
func (f *Fleet) readyAgain(ctx context.Context, e *engine, old int) error {
	for {
		changed := f.Changed()
		switch st, pid := e.status(); {
		case st == StateReady && pid != 0 && pid != old:
			return nil
		case st == StateStopped || st == StateFailed:
			return fmt.Errorf("engine %s: %s", e.ep.Addr(), st)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			e.logger().Debug("gave up waiting for the engine to be ready", zap.Error(context.Cause(ctx)))
			return fmt.Errorf("engine %s not ready: %w", e.ep.Addr(), context.Cause(ctx))
		}
	}
}
