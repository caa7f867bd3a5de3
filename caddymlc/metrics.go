package caddymlc

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// routerMetrics are the router's Prometheus metrics, served by Caddy's
// metrics endpoint. They are shared by every mlc_router of a process.
type routerMetrics struct {
	requests    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	preemptions prometheus.Counter
	tokens      prometheus.Counter
	ttft        prometheus.Histogram
	inflight    *prometheus.GaugeVec
}

var (
	metricsOnce sync.Once
	metrics     *routerMetrics
)

func sharedMetrics() *routerMetrics {
	metricsOnce.Do(func() {
		const ns, sub = "caddy", "mlc"
		metrics = &routerMetrics{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
				Help: "Completion requests by routing mode and outcome (ok, client_error, unavailable, failed, canceled)."}, []string{"mode", "outcome"}),
			retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
				Help: "Attempts retried, by cause (preempt or failure)."}, []string{"cause"}),
			preemptions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "preemptions_total",
				Help: `Attempts an engine ended with finish_reason "preempt".`}),
			tokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "completion_tokens_total",
				Help: "Tokens generated for clients."}),
			ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "time_to_first_token_seconds",
				Help: "Time from a request's arrival to its first text.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
			inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "engine_inflight_requests",
				Help: "Requests in flight per engine, as the router balances them."}, []string{"engine"}),
		}
	})
	return metrics
}

// register adds the metrics to a registry (Caddy's), once per registry.
func (m *routerMetrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.retries, m.preemptions, m.tokens, m.ttft, m.inflight} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

func (m *routerMetrics) retry(preempted bool) {
	cause := "failure"
	if preempted {
		cause = "preempt"
	}
	m.retries.WithLabelValues(cause).Inc()
}

func (m *routerMetrics) preempted() { m.preemptions.Inc() }
