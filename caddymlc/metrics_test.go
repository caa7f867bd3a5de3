package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The router's metrics count requests, tokens and retries, and the
// in-flight gauge comes back to 0.
func TestMetricsCount(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	ok := func() float64 {
		return metricValue(t, "caddy_mlc_requests_total", "model", "tiny", "mode", router.ModeDisagg, "endpoint", "completions", "outcome", "ok")
	}
	bad := func() float64 {
		return metricValue(t, "caddy_mlc_requests_total", "model", "tiny", "mode", router.ModeDisagg, "endpoint", "completions", "outcome", "client_error")
	}
	tokens := func() float64 { return metricValue(t, "caddy_mlc_completion_tokens_total") }
	okBefore, badBefore, tokBefore := ok(), bad(), tokens()
	if _, err := s.stream(context.Background(), s.base, greedy("count me", 5)); err != nil {
		t.Fatal(err)
	}
	post(t, s.base+"/v1/completions", map[string]any{"prompt": ""}, 400)
	if d := ok() - okBefore; d != 1 {
		t.Fatalf("ok requests +%v, want +1", d)
	}
	if d := bad() - badBefore; d != 1 {
		t.Fatalf("client errors +%v, want +1", d)
	}
	if d := tokens() - tokBefore; d != 5 {
		t.Fatalf("tokens +%v, want +5", d)
	}
	for _, e := range liveNow().lifecycle.Statuses()[0].Engines {
		if g := metricValue(t, "caddy_mlc_engine_inflight_requests", "engine", e.Addr); g != 0 {
			t.Fatalf("in-flight gauge of %s is %v", e.Addr, g)
		}
	}
}

// The router's own part of the time to first token leaves out the time it
// waits on the engine: an engine that takes engineDelay to answer adds
// that much to the time to first token, and nothing to the router's part.
func TestRouterOverheadExcludesEngineWait(t *testing.T) {
	const engineDelay = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.PathCompletions {
			w.Write([]byte(`{"object":"list","data":[{"id":"tiny","object":"model"}]}`))
			return
		}
		var req protocol.CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(engineDelay) // the engine's work, not a synchronisation
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"c","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":"slow engine","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"c","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":"slow","finish_reason":null}]}`,
			`{"id":"c","object":"text_completion","created":1,"model":"tiny","choices":[{"index":0,"text":" engine","finish_reason":"length"}]}`,
			`{"id":"c","object":"text_completion","created":1,"model":"tiny","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
	}))
	t.Cleanup(srv.Close)
	port := freePorts(t, 1)[0]
	reloadSite(t, port, fmt.Sprintf("\t\tmode whole\n\t\tendpoint %s external\n", srv.Listener.Addr()))
	t.Cleanup(func() { stopCaddy(t) })
	ttft := func() *dto.Histogram {
		return metricHistogram(t, "caddy_mlc_time_to_first_token_seconds", "model", "tiny", "mode", router.ModeWhole)
	}
	own := func() *dto.Histogram {
		return metricHistogram(t, "caddy_mlc_router_overhead_seconds", "model", "tiny", "mode", router.ModeWhole)
	}
	for _, stream := range []bool{false, true} {
		ttftBefore, ownBefore := ttft(), own()
		body := greedy("how long", 2)
		body["stream"] = stream
		answer := post(t, fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), body, http.StatusOK)
		if !strings.Contains(string(answer), "slow") || !strings.Contains(string(answer), "engine") {
			t.Fatalf("stream %v: answer %s", stream, answer)
		}
		ttftAfter, ownAfter := ttft(), own()
		if ttftAfter.GetSampleCount()-ttftBefore.GetSampleCount() != 1 || ownAfter.GetSampleCount()-ownBefore.GetSampleCount() != 1 {
			t.Fatalf("stream %v: observations: time to first token +%d, router overhead +%d; want +1 each", stream,
				ttftAfter.GetSampleCount()-ttftBefore.GetSampleCount(), ownAfter.GetSampleCount()-ownBefore.GetSampleCount())
		}
		first := time.Duration((ttftAfter.GetSampleSum() - ttftBefore.GetSampleSum()) * float64(time.Second))
		routerPart := time.Duration((ownAfter.GetSampleSum() - ownBefore.GetSampleSum()) * float64(time.Second))
		t.Logf("stream %v: time to first token %v, the router's part %v", stream, first, routerPart)
		if first < engineDelay {
			t.Fatalf("stream %v: time to first token %v, under the engine's own %v", stream, first, engineDelay)
		}
		if routerPart <= 0 || routerPart > first-engineDelay {
			t.Fatalf("stream %v: the router's part %v: want within (0, %v] (the time to first token %v less the engine's %v)",
				stream, routerPart, first-engineDelay, first, engineDelay)
		}
	}
}
