package engine

import (
	"fmt"

	"go.uber.org/zap"
)

// Reconfigure applies to a running fleet what a reload may change without
// new processes: the roles and supervision settings of spec (startup
// timeout, stop grace, health interval, hang timeout) and the logger.
// spec must have the fleet's [Spec.Key]; a nil log keeps the current
// logger.
//
// The new settings take effect at once where they are waited on (a health
// check ticker is reset) and otherwise at their next use (the startup
// timeout of the next restart). The new logger takes over every goroutine
// of the fleet, the output readers of running engines included: the
// previous configuration's log outputs may be closed once Reconfigure
// returns.
func (f *Fleet) Reconfigure(spec Spec, log *zap.Logger) error {
	spec = spec.Normalize()
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("engine: reconfigure: %w", err)
	}
	if spec.Key() != f.spec.Key() {
		return fmt.Errorf("engine: reconfigure: spec %s does not define this fleet's processes (%s)", spec.Key(), f.spec.Key())
	}
	f.reconfigMu.Lock()
	defer f.reconfigMu.Unlock()
	f.live.Store(&spec)
	if log != nil {
		f.logp.Store(log)
		for _, e := range f.engines {
			e.setLogger(log)
		}
	}
	f.mu.Lock()
	close(f.reconfigSig)
	f.reconfigSig = make(chan struct{})
	f.mu.Unlock()
	f.logger().Info("engine fleet reconfigured", zap.Stringer("health_interval", spec.HealthInterval),
		zap.Stringer("hang_timeout", spec.HangTimeout), zap.Stringer("startup_timeout", spec.StartupTimeout),
		zap.Stringer("stop_grace", spec.StopGrace))
	return nil
}

// settings returns the current spec: the fleet's processes, with the roles
// and supervision settings of the latest Reconfigure.
func (f *Fleet) settings() *Spec { return f.live.Load() }

// logger returns the fleet's current logger.
func (f *Fleet) logger() *zap.Logger { return f.logp.Load() }

// reconfigured returns a channel that is closed at the next Reconfigure.
func (f *Fleet) reconfigured() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reconfigSig
}
