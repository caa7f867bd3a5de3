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
	toolCalls   *prometheus.CounterVec // tool calls read out of answers, by model and endpoint
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
	// capacityWaits counts attempts that found no engine with room.
	capacityWaits prometheus.Counter
	// dropped counts clients the router let go, by reason.
	dropped *prometheus.CounterVec
	// The gate: how long requests waited for the engines' capacity, how
	// many wait, and the requests refused for a spent budget. Tenants are
	// labelled by tenants: the top ones by name, the rest as other.
	admissionWait *prometheus.HistogramVec
	waiting       *prometheus.GaugeVec
	rateLimited   *prometheus.CounterVec
	tenants       *fair.Labels
	// prefixPrompt and prefixHit are the prompt tokens a prefix-reading
	// policy routed and those its pick was expected to hold (prefixhits.go).
	prefixPrompt, prefixHit *prometheus.CounterVec
	// latency are the engines' latency models' (latency.go).
	latency latencyMetrics
	// slo counts requests with targets by whether they met them,
	// sloRefused those the gate refused for them (attainment.go).
	slo, sloRefused *prometheus.CounterVec
	cache           cacheMetrics
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
		metrics = &routerMetrics{
			requests:       newCounterVec("requests_total", "Requests by model, routing mode, endpoint (completions, chat, embeddings, messages, responses) and outcome (ok, client_error, unavailable, failed, canceled).", "model", "mode", "endpoint", "outcome"),
			toolCalls:      newCounterVec("tool_calls_total", "Tool calls read out of answers and sent to clients, by model and endpoint (chat, messages, responses).", "model", "api"),
			retries:        newCounterVec("retries_total", "Attempts retried, by cause (preempt, failure, timeout, migrate: a drained engine's grace ended; prefill; parked: a stream whose client stopped reading resumed once it read again).", "cause"),
			preemptions:    newCounter("preemptions_total", `Attempts an engine ended with finish_reason "preempt".`),
			tokens:         newCounter("completion_tokens_total", "Tokens generated for clients."),
			ttft:           newHistogramVec("time_to_first_token_seconds", "Time from a request's arrival to its first text, by routing mode.", prometheus.ExponentialBuckets(0.001, 2, 18), "model", "mode"),
			ownTime:        newHistogramVec("router_overhead_seconds", "The part of the time to first token spent in the router's own work (parsing, tokenizing, choosing engines, encoding, writing), not waiting on an engine, the queue or a retry's backoff, by routing mode.", prometheus.ExponentialBuckets(0.00002, 1.5, 28), "model", "mode"),
			itl:            newHistogramVec("inter_token_latency_seconds", "Time between two pieces of a choice's text as the router sends them, by model and routing mode.", prometheus.ExponentialBuckets(0.0001, 2, 18), "model", "mode"),
			steps:          newHistogramVec("microserving_step_seconds", "Duration of the microserving calls: prep_recv, remote_send, start_generate (to its first byte).", prometheus.ExponentialBuckets(0.0001, 2, 18), "step"),
			kvBytes:        newCounter("kv_transfer_bytes_total", "KV cache bytes moved from prefill to decode engines, as the engines report them."),
			inflight:       newGaugeVec("engine_inflight_requests", "Requests in flight per engine, as the router balances them.", "engine"),
			kvPages:        newGaugeVec("engine_kv_pages", "KV cache pages of each engine by state (used: held by sequences; cached: kept by the prefix cache, evictable; free), as the engine last reported them.", "engine", "state"),
			engineRequests: newCounterVec("engine_requests_total", "Calls made to each engine (a disaggregated request makes one to its decode engine and one to its prefill engine).", "engine"),
			queued:         newGauge("queued_requests", "Requests waiting for an engine (none ready: engines starting or restarting, a reload)."),
			queueWait:      newHistogram("queue_wait_seconds", "Time requests waited for an engine.", prometheus.ExponentialBuckets(0.001, 4, 10)),
			releases:       newCounterVec("reservations_released_total", "prep_recv reservations given back before use, by how (release, start_generate, failed).", "how"),
			localPrefills:  newCounterVec("local_prefills_total", "Disaggregated requests one engine served whole, by reason: the decode engine prefilled them itself (prefill_busy, no_prefill_engine, remote_send_failed, unknown_pe, empty_window), or a prefill engine served them for want of decode room (decode_short).", "reason"),
			capacityWaits:  newCounter("capacity_waits_total", "Disaggregated attempts that found no engine with room for them (no decode engine ready or with KV room, nor a prefill engine with room to serve them whole): they wait, in the router's queue for queue_timeout or on a full engine."),
			dropped:        newCounterVec("clients_dropped_total", "Clients the router let go, by reason (slow_body: the body did not arrive within body_timeout; stalled: the client accepted no byte for client_timeout; no_descriptors: no file descriptor left to reach an engine; not_accepted: none left to accept the client, answered 503 by mlc_descriptor_reserve).", "reason"),
			admissionWait:  newHistogramVec("admission_wait_seconds", "Time requests waited in the router's fair queue for the engines' capacity, by model and tenant (the top tenants by traffic; the rest as other).", prometheus.ExponentialBuckets(0.0005, 4, 10), "model", "tenant"),
			waiting:        newGaugeVec("admission_waiting_requests", "Requests waiting in the router's fair queue for the engines' capacity, by model.", "model"),
			rateLimited:    newCounterVec("rate_limited_total", "Requests refused with a 429 for a spent budget, by tenant (the top tenants by traffic; the rest as other) and budget (tokens, requests).", "tenant", "limit"),
		}
		metrics.prefixPrompt, metrics.prefixHit = newPrefixHitCounters()
		metrics.latency, metrics.slo, metrics.sloRefused = newLatencyMetrics(), newSLORequests(), newSLORefused()
		metrics.cache = newCacheMetrics()
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
	for _, c := range append([]prometheus.Collector{m.requests, m.toolCalls, m.retries, m.preemptions, m.tokens, m.ttft, m.ownTime, m.itl, m.steps, m.kvBytes, m.inflight, m.kvPages,
		m.queued, m.queueWait, m.releases, m.localPrefills, m.capacityWaits, m.engineRequests, m.dropped,
		m.admissionWait, m.waiting, m.rateLimited, m.prefixPrompt, m.prefixHit, m.slo, m.sloRefused}, append(m.latency.collectors(), m.cache.collectors()...)...) {
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

// The router's metrics are caddy_mlc_<name>, as Caddy's own are
// caddy_<subsystem>_<name>.
const metricsNamespace, metricsSubsystem = "caddy", "mlc"

func newCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help})
}

func newCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}, labels)
}

func newGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help})
}

func newGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}, labels)
}

func newHistogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets})
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets}, labels)
}
