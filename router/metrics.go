package router

import (
	"errors"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/router/fair"
	"github.com/prometheus/client_golang/prometheus"
)

// routerMetrics are the router's Prometheus metrics, served by Caddy's
// metrics endpoint. They are shared by every mlc_router of a process.
type routerMetrics struct {
	requests    *prometheus.CounterVec
	retries     *prometheus.CounterVec
	preemptions prometheus.Counter
	tokens      prometheus.Counter
	ttft        *prometheus.HistogramVec
	// ownTime is the part of the time to first token the router spent
	// on its own work, not waiting on an engine.
	ownTime *prometheus.HistogramVec
	// itl is the time between two pieces of text a client receives.
	itl *prometheus.HistogramVec
	// steps times the microserving calls (to their answer, or to the
	// first byte of start_generate's stream).
	steps *prometheus.HistogramVec
	// kvBytes counts the KV cache bytes remote_sends moved, as the
	// engines report them.
	kvBytes  prometheus.Counter
	inflight *prometheus.GaugeVec
	// drainState is each engine's drain: 0 in rotation, 1 draining, 2
	// drained (see Upstream.Drain).
	drainState *prometheus.GaugeVec
	// kvPages are each engine's KV cache pages by state, as it reported.
	kvPages *prometheus.GaugeVec
	// engineRequests counts the calls made to each engine.
	engineRequests *prometheus.CounterVec
	queued         prometheus.Gauge
	queueWait      prometheus.Histogram
	releases       *prometheus.CounterVec
	// localPrefills counts disaggregated requests the decode engine
	// prefilled itself, by reason.
	localPrefills *prometheus.CounterVec
	// dropped counts clients the router let go, by reason.
	dropped *prometheus.CounterVec
	// The gate: how long requests waited for the engines' capacity, how
	// many wait, and the requests refused for a spent budget. Tenants are
	// labelled by tenants: the top ones by name, the rest as other.
	admissionWait *prometheus.HistogramVec
	waiting       *prometheus.GaugeVec
	rateLimited   *prometheus.CounterVec
	tenants       *fair.Labels
	// prefixEvents counts other replicas' prefix index changes applied
	// here, by kind.
	prefixEvents *prometheus.CounterVec
	// latency are the engines' latency models' (latency.go).
	latency latencyMetrics
	// slo counts requests with targets by whether they met them,
	// sloRefused those the gate refused for them (attainment.go).
	slo, sloRefused *prometheus.CounterVec
}

// tenantLabels is how many tenants the metrics name; the rest are
// "other", so that a key per client cannot grow the series without bound.
const tenantLabels = 10

var (
	metricsOnce sync.Once
	metrics     *routerMetrics
)

func sharedMetrics() *routerMetrics {
	metricsOnce.Do(func() {
		const ns, sub = "caddy", "mlc"
		metrics = &routerMetrics{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
				Help: "Requests by model, routing mode, endpoint (completions, chat, embeddings, messages, responses) and outcome (ok, client_error, unavailable, failed, canceled)."}, []string{"model", "mode", "endpoint", "outcome"}),
			retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
				Help: "Attempts retried, by cause (preempt, failure, timeout, migrate: a drained engine's grace ended)."}, []string{"cause"}),
			preemptions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "preemptions_total",
				Help: `Attempts an engine ended with finish_reason "preempt".`}),
			tokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "completion_tokens_total",
				Help: "Tokens generated for clients."}),
			ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "time_to_first_token_seconds",
				Help: "Time from a request's arrival to its first text, by routing mode.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, []string{"model", "mode"}),
			ownTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "router_overhead_seconds",
				Help:    "The part of the time to first token spent in the router's own work (parsing, tokenizing, choosing engines, encoding, writing), not waiting on an engine, the queue or a retry's backoff, by routing mode.",
				Buckets: prometheus.ExponentialBuckets(0.00002, 1.5, 28)}, []string{"model", "mode"}),
			itl: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "inter_token_latency_seconds",
				Help: "Time between two pieces of a choice's text as the router sends them, by model and routing mode.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"model", "mode"}),
			steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "microserving_step_seconds",
				Help: "Duration of the microserving calls: prep_recv, remote_send, start_generate (to its first byte).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"step"}),
			kvBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "kv_transfer_bytes_total",
				Help: "KV cache bytes moved from prefill to decode engines, as the engines report them."}),
			inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "engine_inflight_requests",
				Help: "Requests in flight per engine, as the router balances them."}, []string{"engine"}),
			drainState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "engine_drain_state",
				Help: "Each engine's drain by an operator: 0 in rotation, 1 draining (out of rotation, attempts still on it), 2 drained (nothing on it)."}, []string{"engine"}),
			kvPages: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "engine_kv_pages",
				Help: "KV cache pages of each engine by state (used: held by sequences; cached: kept by the prefix cache, evictable; free), as the engine last reported them."}, []string{"engine", "state"}),
			engineRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "engine_requests_total",
				Help: "Calls made to each engine (a disaggregated request makes one to its decode engine and one to its prefill engine)."}, []string{"engine"}),
			queued: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "queued_requests",
				Help: "Requests waiting for an engine (none ready: engines starting or restarting, a reload)."}),
			queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "queue_wait_seconds",
				Help: "Time requests waited for an engine.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
			releases: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reservations_released_total",
				Help: "prep_recv reservations given back before use, by how (release, start_generate, failed)."}, []string{"how"}),
			localPrefills: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "local_prefills_total",
				Help: "Disaggregated requests the decode engine prefilled itself, by reason (prefill_busy, no_prefill_engine, remote_send_failed, unknown_pe, empty_window)."}, []string{"reason"}),
			dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clients_dropped_total",
				Help: "Clients the router let go, by reason (slow_body: the body did not arrive within body_timeout; stalled: the client accepted no byte for client_timeout; no_descriptors: no file descriptor left to reach an engine; not_accepted: none left to accept the client, answered 503 by mlc_descriptor_reserve)."}, []string{"reason"}),
			admissionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "admission_wait_seconds",
				Help:    "Time requests waited in the router's fair queue for the engines' capacity, by model and tenant (the top tenants by traffic; the rest as other).",
				Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"model", "tenant"}),
			waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "admission_waiting_requests",
				Help: "Requests waiting in the router's fair queue for the engines' capacity, by model."}, []string{"model"}),
			rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rate_limited_total",
				Help: "Requests refused with a 429 for a spent budget, by tenant (the top tenants by traffic; the rest as other) and budget (tokens, requests)."}, []string{"tenant", "limit"}),
			prefixEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "prefix_events_applied_total",
				Help: "Changes other replicas made to their prefix indexes, applied to this replica's (cluster option), by kind (routed, matched, finished)."}, []string{"kind"}),
		}
		metrics.latency, metrics.slo, metrics.sloRefused = newLatencyMetrics(ns, sub), newSLORequests(ns, sub), newSLORefused(ns, sub)
		metrics.tenants = fair.NewLabels(tenantLabels, metrics.forgetTenant)
	})
	return metrics
}

// forgetTenant drops the series of a tenant the labels no longer name.
func (m *routerMetrics) forgetTenant(name string) {
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.admissionWait, m.rateLimited, m.slo, m.sloRefused} {
		v.DeletePartialMatch(prometheus.Labels{"tenant": name})
	}
}

// register adds the metrics to a registry (Caddy's), once per registry.
func (m *routerMetrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range append([]prometheus.Collector{m.requests, m.retries, m.preemptions, m.tokens, m.ttft, m.ownTime, m.itl, m.steps, m.kvBytes, m.inflight, m.drainState, m.kvPages,
		m.queued, m.queueWait, m.releases, m.localPrefills, m.engineRequests, m.dropped,
		m.admissionWait, m.waiting, m.rateLimited, m.prefixEvents, m.slo, m.sloRefused}, append(scaleCollectors(), m.latency.collectors()...)...) {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// retry counts a retried attempt by its cause (see retryCause).
func (m *routerMetrics) retry(cause string) { m.retries.WithLabelValues(cause).Inc() }

func (m *routerMetrics) preempted() { m.preemptions.Inc() }

// RegisterMetrics adds the router's metrics to reg (Caddy's registry),
// once per registry; every router of a process shares them.
func RegisterMetrics(reg prometheus.Registerer) error { return sharedMetrics().register(reg) }
