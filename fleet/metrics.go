package fleet

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// scaleMetrics are the autoscaler's metrics.
type scaleMetrics struct {
	decisions *prometheus.CounterVec
	target    *prometheus.GaugeVec
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
		}
	})
	return scaleMetricsVal
}

// RegisterMetrics adds the autoscalers' metrics to reg (Caddy's
// registry), once per registry; every fleet of a process shares them.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	m := scaleMetricsOf()
	for _, c := range []prometheus.Collector{m.decisions, m.target} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}
