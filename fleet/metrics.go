package fleet

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// scaleMetrics are the lifecycle's metrics: the autoscalers' and the
// drains'.
type scaleMetrics struct {
	decisions *prometheus.CounterVec
	target    *prometheus.GaugeVec
	// drainState is each engine's drain: 0 in rotation, 1 draining, 2
	// drained (see Fleet.Drain).
	drainState *prometheus.GaugeVec
}

var (
	scaleMetricsOnce sync.Once
	scaleMetricsVal  *scaleMetrics
)

func scaleMetricsOf() *scaleMetrics {
	scaleMetricsOnce.Do(func() {
		scaleMetricsVal = &scaleMetrics{
			decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "caddy", Subsystem: "mlc", Name: "scale_decisions_total",
				Help: "The autoscaler's changes of a model's engines, by direction (up, down) and reason."}, []string{"model", "direction", "reason"}),
			target: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "caddy", Subsystem: "mlc", Name: "scale_target",
				Help: "The number of spawned engines the autoscaler brings a model to."}, []string{"model"}),
			drainState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "caddy", Subsystem: "mlc", Name: "engine_drain_state",
				Help: "Each engine's drain by an operator: 0 in rotation, 1 draining (out of rotation, attempts still on it), 2 drained (nothing on it)."}, []string{"engine"}),
		}
	})
	return scaleMetricsVal
}

// RegisterMetrics adds the lifecycle's metrics to reg (Caddy's
// registry), once per registry; every fleet of a process shares them.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	m := scaleMetricsOf()
	for _, c := range []prometheus.Collector{m.decisions, m.target, m.drainState} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}
