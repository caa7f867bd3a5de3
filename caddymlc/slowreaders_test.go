package caddymlc

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// stalledRequest is a raw streamed completion request for addr.
func stalledRequest(addr string, body map[string]any) string {
	b := mustJSON(body)
	return fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(b), b)
}

// enginesIdle reports whether no engine runs a request or holds KV.
func enginesIdle(t *testing.T, s *site) bool {
	for _, e := range s.engines {
		m := engineMetrics(t, e)
		if m["running"] != 0 || m["kv_pages_used"] != 0 {
			return false
		}
	}
	return true
}

// Clients that stop reading cost the others nothing: long before
// client_timeout lets them go, their streams leave the engines' batch
// (they are parked), and a normal client's first token comes as fast as
// beside none.
func TestStalledReadersCostOthersNothing(t *testing.T) {
	s := startSite(t, 3, "\t\t\tmode disagg\n\t\t\tclient_timeout 30s\n")
	addr := strings.TrimPrefix(s.base, "http://")
	ttft := func() time.Duration {
		t.Helper()
		st, err := s.stream(context.Background(), s.base, greedy("the old king", 4))
		if err != nil || !st.done || st.text == "" {
			t.Fatalf("a normal client: %v %+v", err, st)
		}
		return st.firstAfter
	}
	var alone time.Duration
	for range 3 {
		alone = max(alone, ttft())
	}
	const clients = 50
	begin := time.Now()
	for range clients {
		testnet.StalledClient(t, addr, stalledRequest(addr, map[string]any{"prompt": "a long long story about the sea", "max_tokens": 4000, "temperature": 0, "stream": true}))
	}
	waitFor(t, "the engines to run the stalled streams", func() bool {
		return engineMetrics(t, s.engines[1])["running"]+engineMetrics(t, s.engines[2])["running"] > 0
	})
	// Their clients hold their connections for client_timeout (30 s);
	// their engines' work must end long before.
	deadline := begin.Add(12 * time.Second)
	for !enginesIdle(t, s) {
		if time.Now().After(deadline) {
			t.Fatalf("the engines still run streams whose clients read nothing %v after they began (running %v/%v)",
				time.Since(begin).Round(time.Millisecond), engineMetrics(t, s.engines[1])["running"], engineMetrics(t, s.engines[2])["running"])
		}
		time.Sleep(50 * time.Millisecond) // polling the engines' own state
	}
	freed := time.Since(begin)
	var beside time.Duration
	for range 20 {
		beside = max(beside, ttft())
	}
	t.Logf("stalled streams left the engines after %v; ttft alone %v, beside %d stalled %v", freed.Round(time.Millisecond), alone, clients, beside)
	// The goal, with room for a loaded CI machine; the figures
	// are in the log.
	if goal := time.Second + 5*alone; beside > goal {
		t.Errorf("a normal client's first token beside %d stalled ones took %v, alone %v (goal %v)", clients, beside, alone, goal)
	}
}

// A client that pauses reading past the time a parked stream waits, and
// then reads on, gets the same text as one that never paused: its
// choice resumed from the text delivered.
func TestParkedStreamResumesExactly(t *testing.T) {
	// The engines take longer to generate the answer (1,500 × 3 ms) than
	// a write waits before its stream is parked (2 s), so the stream is
	// parked while its engine still works on it.
	s := startSite(t, 2, "\t\t\tclient_timeout 30s\n\t\t\tengine_args --decode-delay 3ms\n")
	addr := strings.TrimPrefix(s.base, "http://")
	body := greedy("a long long story about the sea", 1500)
	before := metricValue(t, "caddy_mlc_retries_total", "cause", "parked")
	want, code, raw := s.complete(s.base, body)
	if code != http.StatusOK {
		t.Fatalf("reference: %d %s", code, raw)
	}
	body["stream"] = true
	conn := testnet.StalledClient(t, addr, stalledRequest(addr, body))
	waitFor(t, "the stream to start", func() bool { return !enginesIdle(t, s) })
	// The client reads nothing until its stream was parked: its engine let it go.
	waitFor(t, "the stream to be parked", func() bool { return enginesIdle(t, s) })
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	st, err := readStream(resp.Body, time.Now())
	if err != nil || !st.done {
		t.Fatalf("the paused stream: %v %+v", err, st)
	}
	if st.text != want.Choices[0].Text {
		t.Errorf("the paused stream's text differs from the reference:\n got %q\nwant %q", st.text, want.Choices[0].Text)
	}
	if st.finish != want.Choices[0].Finished() {
		t.Errorf("the paused stream finished with %q, the reference with %q", st.finish, want.Choices[0].Finished())
	}
	if d := metricValue(t, "caddy_mlc_retries_total", "cause", "parked") - before; d != 1 {
		t.Errorf("retries_total{cause=parked} grew by %v, want 1", d)
	}
}
