package caddymlc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// routerVars are the request variables the router sets.
var routerVars = []string{router.VarRequestID, router.VarOutcome, router.VarEngine, router.VarAttempts, router.VarPreemptions, router.VarPromptTokens, router.VarCachedTokens, router.VarCompletionTokens}

// startLoggedSite starts a disaggregated router on two engines whose
// access log (JSON, in a file) carries the router's request variables,
// through log_append, as a user's Caddyfile would.
func startLoggedSite(t *testing.T) (*site, string) {
	t.Helper()
	ports := freePorts(t, 3)
	logPath := filepath.Join(t.TempDir(), "access.log")
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	var appends strings.Builder
	for _, v := range routerVars {
		fmt.Fprintf(&appends, "\t\tlog_append %s %s\n", v, v)
	}
	for _, p := range ports[1:] {
		s.engines = append(s.engines, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
	skip_install_trust
}
http://127.0.0.1:%d {
	log {
		output file %s
		format json
	}
	route {
%s		mlc_router {
			model tiny
			mode disagg
			prefix_cache radix
			endpoint 127.0.0.1:%d
			endpoint 127.0.0.1:%d
		}
	}
}
`, ports[0], logPath, appends.String(), ports[1], ports[2]))
	return s, logPath
}

// accessLog returns the entries of the access log that have the router's
// request id, by id.
func accessLog(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if id, ok := e[router.VarRequestID].(string); ok {
			out[id] = e
		}
	}
	return out
}

// waitLogged waits until the access log has n entries with a request id
// and returns them.
func waitLogged(t *testing.T, path string, n int) map[string]map[string]any {
	t.Helper()
	var entries map[string]map[string]any
	waitFor(t, fmt.Sprintf("%d access log entries", n), func() bool {
		entries = accessLog(t, path)
		return len(entries) >= n
	})
	return entries
}

// The facts of a request are request variables, which access logs (and
// log_append) can use: its id, outcome, engine, attempts, preemptions and
// token counts.
func TestRequestVariablesReachTheAccessLog(t *testing.T) {
	s, logPath := startLoggedSite(t)
	got, status, raw := s.complete(s.base, greedy("the old mill", 5))
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	entries := waitLogged(t, logPath, 1)
	e := entries[got.ID]
	if e == nil {
		t.Fatalf("no access log entry for %s: %v", got.ID, entries)
	}
	decode := strings.TrimPrefix(s.engines[1], "http://")
	want := map[string]any{router.VarOutcome: "ok", router.VarEngine: decode, router.VarAttempts: 1.0, router.VarPreemptions: 0.0,
		router.VarPromptTokens: float64(got.Usage.PromptTokens), router.VarCompletionTokens: 5.0}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s = %v (%T), want %v; entry %v", k, e[k], e[k], v, e)
		}
	}
	// The same prompt again finds it in the engines' caches: the log has
	// what the usage says.
	long := strings.Repeat("the old mill by the river ", 8)
	if _, status, raw := s.complete(s.base, greedy(long, 5)); status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	again, status, raw := s.complete(s.base, greedy(long, 5))
	if status != 200 || again.Usage.PromptTokensDetails == nil {
		t.Fatalf("%d %s", status, raw)
	}
	cached := again.Usage.PromptTokensDetails.CachedTokens
	if cached <= 0 {
		t.Errorf("the prompt again: %d cached tokens", cached)
	}
	if e := waitLogged(t, logPath, 3)[again.ID]; e == nil || e[router.VarCachedTokens] != float64(cached) {
		t.Errorf("%s = %v, the usage says %d", router.VarCachedTokens, e[router.VarCachedTokens], cached)
	}
}

// A client that reads part of a stream and leaves: the tokens it was sent
// are counted, in the metrics and in the request's variables, not 0.
func TestUsageCountsWhatALeavingClientGot(t *testing.T) {
	s, logPath := startLoggedSite(t)
	tokensBefore := metricValue(t, "caddy_mlc_completion_tokens_total")
	const maxTokens, read = 2000, 40
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := with(greedy("a long long story about the sea", maxTokens), "stream", true)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+protocol.PathCompletions, strings.NewReader(mustJSON(body)))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sse := protocol.NewSSEReader(resp.Body, 0)
	id := ""
	for range read {
		data, err := sse.Next()
		if err != nil {
			t.Fatal(err)
		}
		var c protocol.CompletionResponse
		if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) == 0 || c.Choices[0].Text == "" {
			t.Fatalf("chunk %s: %v", data, err)
		}
		id = c.ID
	}
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	e := waitLogged(t, logPath, 1)[id]
	if e == nil || e[router.VarOutcome] != "canceled" {
		t.Fatalf("access log entry of %s: %v", id, e)
	}
	counted := metricValue(t, "caddy_mlc_completion_tokens_total") - tokensBefore
	if counted < read || counted >= maxTokens {
		t.Fatalf("%v tokens counted for a client that read %d chunks of a %d-token answer", counted, read, maxTokens)
	}
	if e[router.VarCompletionTokens] != counted {
		t.Fatalf("the request's %s is %v, the metric counted %v", router.VarCompletionTokens, e[router.VarCompletionTokens], counted)
	}
	t.Logf("the client read %d chunks; %v tokens were delivered and counted", read, counted)
}
