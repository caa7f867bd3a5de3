package builtin

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Metrics is a snapshot of the engine's state and totals.
type Metrics struct {
	Running       int // sequences being prefilled or decoded
	Waiting       int // sequences queued (new or preempted) and prep_recvs waiting for pages
	Prepared      int // prep_recv reservations waiting for start_generate
	Pages         kvcache.Stats
	Preemptions   int64
	PrefillTokens int64
	DecodeTokens  int64
}

// Metrics returns a snapshot taken on the scheduler goroutine.
func (e *Engine) Metrics() (Metrics, error) {
	var m Metrics
	err := e.do(func() { m = e.snapshot() })
	return m, err
}

func (e *Engine) snapshot() Metrics {
	return Metrics{
		Running: len(e.running), Waiting: len(e.waiting) + len(e.pendingPrep), Prepared: len(e.prepared),
		Pages:       e.pool.Stats(),
		Preemptions: e.stats.preemptions, PrefillTokens: e.stats.prefillTokens, DecodeTokens: e.stats.decodeTokens,
	}
}

// extra is the usage.extra of a query_engine_metrics request.
func (m Metrics) extra() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		"running":         jsonInt(m.Running),
		"waiting":         jsonInt(m.Waiting),
		"prepared":        jsonInt(m.Prepared),
		"kv_pages_used":   jsonInt(m.Pages.Used),
		"kv_pages_cached": jsonInt(m.Pages.Cached),
		"kv_pages_free":   jsonInt(m.Pages.Free),
		"kv_pages_total":  jsonInt(m.Pages.Total),
		"preemptions":     jsonInt(int(m.Preemptions)),
		"prefill_tokens":  jsonInt(int(m.PrefillTokens)),
		"decode_tokens":   jsonInt(int(m.DecodeTokens)),
	}
}

// metricsCompletion answers debug_config.special_request
// "query_engine_metrics": a completion with no choices whose usage.extra
// holds the metrics.
func (s *server) metricsCompletion(w http.ResponseWriter, req *protocol.CompletionRequest) {
	m, err := s.e.Metrics()
	if err != nil {
		unavailable(err).Write(w)
		return
	}
	resp := s.response(req, &request{id: newID()})
	resp.Usage = &protocol.Usage{Extra: m.extra()}
	writeJSON(w, resp)
}

// metrics answers GET /metrics in the Prometheus text format.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	m, err := s.e.Metrics()
	if err != nil {
		unavailable(err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	p := func(name, typ, help string, v int64, labels string) {
		if labels == "" || labels == `state="used"` {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		}
		if labels != "" {
			labels = "{" + labels + "}"
		}
		fmt.Fprintf(w, "%s%s %d\n", name, labels, v)
	}
	p("mlc_engine_running_requests", "gauge", "Sequences being prefilled or decoded.", int64(m.Running), "")
	p("mlc_engine_waiting_requests", "gauge", "Sequences waiting to be scheduled.", int64(m.Waiting), "")
	p("mlc_engine_prepared_requests", "gauge", "prep_recv reservations waiting for start_generate.", int64(m.Prepared), "")
	p("mlc_engine_kv_pages", "gauge", "KV cache pages by state (cached: held only by the prefix cache).", int64(m.Pages.Used), `state="used"`)
	p("mlc_engine_kv_pages", "gauge", "", int64(m.Pages.Cached), `state="cached"`)
	p("mlc_engine_kv_pages", "gauge", "", int64(m.Pages.Free), `state="free"`)
	p("mlc_engine_kv_pages_total", "gauge", "KV cache pages in all.", int64(m.Pages.Total), "")
	p("mlc_engine_preemptions_total", "counter", "Sequences preempted for lack of KV pages.", m.Preemptions, "")
	p("mlc_engine_prefill_tokens_total", "counter", "Prompt tokens computed.", m.PrefillTokens, "")
	p("mlc_engine_decode_tokens_total", "counter", "Tokens decoded.", m.DecodeTokens, "")
}
