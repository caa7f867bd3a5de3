package cluster

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	metricsOnce   sync.Once
	upGauge       prometheus.Gauge
	dropped       prometheus.Counter
	prefixApplied *prometheus.CounterVec
	// sessionsApplied counts the other replicas' session events taken in.
	sessionsApplied prometheus.Counter
)

func sharedMetrics() {
	metricsOnce.Do(func() {
		upGauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "caddy", Subsystem: "mlc", Name: "cluster_up",
			Help: "1 while the cluster's Redis answers within its deadline, 0 while the replica goes on with local state."})
		dropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "caddy", Subsystem: "mlc", Name: "cluster_messages_dropped_total",
			Help: "Messages to the other replicas dropped: the queue was full, or Redis out of reach."})
		prefixApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "caddy", Subsystem: "mlc", Name: "prefix_events_applied_total",
			Help: "Changes other replicas made to their prefix indexes, applied to this replica's (cluster option), by kind (routed, matched, finished)."}, []string{"kind"})
		sessionsApplied = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "caddy", Subsystem: "mlc", Name: "session_events_applied_total",
			Help: "Sessions other replicas routed, taken into this replica's table (cluster option)."})
	})
}

// RegisterMetrics adds the cluster's metrics to reg (Caddy's registry),
// once per registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	sharedMetrics()
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{upGauge, dropped, prefixApplied, sessionsApplied} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}
