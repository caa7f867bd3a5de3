package builtin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Metrics is a snapshot of the engine's state and totals.
type Metrics struct {
	Running int // sequences being prefilled or decoded
	Waiting int // sequences queued (new or preempted) and prep_recvs waiting for pages
	// Blocked is the part of Waiting that the last scheduler step could
	// not start (short of KV pages or of a batch slot): work that waits
	// for the engine to free something, where the rest of Waiting has
	// only arrived since and starts at the next step.
	Blocked       int
	Prepared      int // prep_recv reservations waiting for start_generate
	Pages         kvcache.Stats
	Preemptions   int64
	PrefillTokens int64
	DecodeTokens  int64
	// ReusedTokens are the prompt tokens of the requests the engine
	// answered that it took from its prefix cache: the sum of the
	// prefix_matched_length of their usages.
	ReusedTokens int64
	// PrefillTime is the time the engine's steps spent prefilling: MLC's
	// engine_prefill_time_sum, which shows a long prefill progress.
	PrefillTime time.Duration
	// Clock is a timed engine's clock (nil on another).
	Clock *ClockMetrics
}

// ClockMetrics are a timed engine's steps in modelled time: what its GPU
// was busy for, and how late its steps ended against their modelled end,
// summed and at most: an engine whose CPU could not keep its GPU's pace
// (a lag that grows with the load is the CPUs', not the model's).
type ClockMetrics struct {
	Profile           string
	TimeScale         float64
	Steps             int64
	Busy, Lag, MaxLag time.Duration
}

// Metrics returns a snapshot taken on the scheduler goroutine.
func (e *Engine) Metrics() (Metrics, error) {
	var m Metrics
	err := e.do(func() { m = e.snapshot() })
	return m, err
}

func (e *Engine) snapshot() Metrics {
	return Metrics{
		Running: len(e.sched.running), Waiting: len(e.sched.waiting) + len(e.pendingPrep), Blocked: e.blocked, Prepared: len(e.prepared),
		Pages:       e.sched.pool.Stats(),
		Preemptions: e.sched.preemptions, PrefillTokens: e.stats.prefillTokens, DecodeTokens: e.stats.decodeTokens,
		ReusedTokens: e.stats.reusedTokens, PrefillTime: e.stats.prefillTime,
		Clock: e.timed.metrics(),
	}
}

// extra is the usage.extra of a query_engine_metrics request: the load
// and the engine's counters.
func (m Metrics) extra() map[string]json.RawMessage {
	x := m.loadExtra()
	x["kv_pages_used"] = jsonInt(m.Pages.Used)
	x["preemptions"] = jsonInt(int(m.Preemptions))
	x["prefill_tokens"] = jsonInt(int(m.PrefillTokens))
	x["decode_tokens"] = jsonInt(int(m.DecodeTokens))
	x["prefix_reused_tokens"] = jsonInt(int(m.ReusedTokens))
	x[protocol.ExtraPrefillTime], _ = json.Marshal(m.PrefillTime.Seconds())
	return x
}

// loadExtra is the load part of extra: what a router balances on, which
// every request's final usage carries too.
func (m Metrics) loadExtra() map[string]json.RawMessage {
	return protocol.EngineLoad{
		Running: m.Running, Waiting: m.Waiting, Blocked: m.Blocked, Prepared: m.Prepared,
		PagesCached: m.Pages.Cached, PagesFree: m.Pages.Free, PagesTotal: m.Pages.Total,
	}.Extra()
}

// metricsCompletion answers debug_config.special_request
// "query_engine_metrics": a completion with no choices whose usage.extra
// holds the metrics.
func (s *server) metricsCompletion(w http.ResponseWriter, req *protocol.CompletionRequest) {
	usage, perr := s.metricsUsage()
	if perr != nil {
		perr.Write(w)
		return
	}
	resp := s.response(req, &request{id: protocol.NewID("")})
	resp.Usage = usage
	protocol.WriteJSON(w, http.StatusOK, resp)
}

// metricsUsage is the answer to a query_engine_metrics special request:
// the engine's metrics in usage.extra.
func (s *server) metricsUsage() (*protocol.Usage, *protocol.Error) {
	m, err := s.e.Metrics()
	if err != nil {
		return nil, unavailable(err)
	}
	usage := &protocol.Usage{Extra: m.extra()}
	if s.world != nil {
		// caddy-mlc's extension: the engine's place in its NVSHMEM world,
		// how a router that found it by DNS learns its recv_rank.
		usage.Extra[protocol.ExtraPEStart] = jsonInt(s.world.PEStart)
		usage.Extra[protocol.ExtraNPEs] = jsonInt(s.world.NPEs)
		usage.Extra[protocol.ExtraUIDDigest] = jsonString(s.world.uidDigest())
	}
	return usage, nil
}

// metricsHandler serves GET /metrics in the Prometheus formats, from a
// registry of the engine's own (an engine is a process; the test binary
// may hold many).
func metricsHandler(e *Engine) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(e))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// collector exports the engine's Metrics. Each scrape takes one snapshot,
// so the numbers of a scrape agree with each other (the pages add up).
type collector struct {
	e                                          *Engine
	running, waiting, blocked, prepared, pages *prometheus.Desc
	pagesAll                                   *prometheus.Desc
	preemptions, prefillTokens, decodeTokens   *prometheus.Desc
	reusedTokens                               *prometheus.Desc
	timedSteps, timedBusy, timedLag, timedMax  *prometheus.Desc
	timeScale                                  *prometheus.Desc
	grammars, grammarStates, grammarBytes      *prometheus.Desc
	grammarCompile, grammarMasks, grammarMaskS *prometheus.Desc
	grammarDegraded                            *prometheus.Desc
}

func newCollector(e *Engine) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("mlc_engine_"+name, help, labels, nil)
	}
	return &collector{
		e:               e,
		running:         d("running_requests", "Sequences being prefilled or decoded."),
		waiting:         d("waiting_requests", "Sequences waiting to be scheduled."),
		blocked:         d("blocked_requests", "Sequences and prep_recvs the last scheduler step could not start, short of KV pages or a batch slot."),
		prepared:        d("prepared_requests", "prep_recv reservations waiting for start_generate."),
		pages:           d("kv_pages", "KV cache pages by state (cached: held only by the prefix cache).", "state"),
		pagesAll:        d("kv_pages_total", "KV cache pages in all."),
		preemptions:     d("preemptions_total", "Sequences preempted for lack of KV pages."),
		prefillTokens:   d("prefill_tokens_total", "Prompt tokens computed."),
		decodeTokens:    d("decode_tokens_total", "Tokens decoded."),
		reusedTokens:    d("prefix_reused_tokens_total", "Prompt tokens of answered requests taken from the prefix cache."),
		timedSteps:      d("timed_steps_total", "A timed engine's steps that computed."),
		timedBusy:       d("timed_busy_seconds_total", "A timed engine's modelled GPU time, in modelled seconds."),
		timedLag:        d("timed_lag_seconds_total", "How late a timed engine's steps ended against their modelled end, summed, in modelled seconds."),
		timedMax:        d("timed_lag_max_seconds", "The latest a timed engine's step ended against its modelled end, in modelled seconds."),
		timeScale:       d("time_scale", "A timed engine's --time-scale, with its profile.", "profile"),
		grammars:        d("grammar_cache_grammars", "Response formats compiled and cached."),
		grammarStates:   d("grammar_cache_states", "Automaton states the cached grammars hold."),
		grammarBytes:    d("grammar_cache_bytes", "Bytes of the grammar cache: token masks (part mask) and the vocabulary trie (part vocab).", "part"),
		grammarCompile:  d("grammar_compile_seconds_total", "CPU time compiling response formats."),
		grammarMasks:    d("grammar_masks_computed_total", "Token masks computed (each once per grammar state while cached)."),
		grammarMaskS:    d("grammar_mask_seconds_total", "CPU time computing token masks."),
		grammarDegraded: d("grammar_masks_degraded_total", "Token masks past jsongrammar.MaxMaskSteps, which admit the tokens of one byte only."),
	}
}

// Describe sends the descriptions of every metric.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.running, c.waiting, c.blocked, c.prepared, c.pages, c.pagesAll, c.preemptions, c.prefillTokens, c.decodeTokens, c.reusedTokens,
		c.timedSteps, c.timedBusy, c.timedLag, c.timedMax, c.timeScale,
		c.grammars, c.grammarStates, c.grammarBytes, c.grammarCompile, c.grammarMasks, c.grammarMaskS, c.grammarDegraded} {
		ch <- d
	}
}

// Collect sends the metrics of one snapshot.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.e.Metrics()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.running, err)
		return
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.running, m.Running)
	gauge(c.waiting, m.Waiting)
	gauge(c.blocked, m.Blocked)
	gauge(c.prepared, m.Prepared)
	gauge(c.pages, m.Pages.Used, "used")
	gauge(c.pages, m.Pages.Cached, "cached")
	gauge(c.pages, m.Pages.Free, "free")
	gauge(c.pagesAll, m.Pages.Total)
	counter(c.preemptions, m.Preemptions)
	counter(c.prefillTokens, m.PrefillTokens)
	counter(c.decodeTokens, m.DecodeTokens)
	counter(c.reusedTokens, m.ReusedTokens)
	if k := m.Clock; k != nil {
		counter(c.timedSteps, k.Steps)
		ch <- prometheus.MustNewConstMetric(c.timedBusy, prometheus.CounterValue, k.Busy.Seconds())
		ch <- prometheus.MustNewConstMetric(c.timedLag, prometheus.CounterValue, k.Lag.Seconds())
		ch <- prometheus.MustNewConstMetric(c.timedMax, prometheus.GaugeValue, k.MaxLag.Seconds())
		ch <- prometheus.MustNewConstMetric(c.timeScale, prometheus.GaugeValue, k.TimeScale, k.Profile)
	}
	g := c.e.grammars.stats()
	gauge(c.grammars, g.Grammars)
	gauge(c.grammarStates, g.States)
	gauge(c.grammarBytes, int(g.MaskBytes), "mask")
	gauge(c.grammarBytes, int(g.VocabBytes), "vocab")
	ch <- prometheus.MustNewConstMetric(c.grammarCompile, prometheus.CounterValue, g.CompileTime.Seconds())
	ch <- prometheus.MustNewConstMetric(c.grammarMasks, prometheus.CounterValue, float64(g.MasksCompute))
	ch <- prometheus.MustNewConstMetric(c.grammarMaskS, prometheus.CounterValue, g.MaskTime.Seconds())
	ch <- prometheus.MustNewConstMetric(c.grammarDegraded, prometheus.CounterValue, float64(g.MasksDegraded))
}
