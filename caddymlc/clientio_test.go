package caddymlc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// A body that never ends, chunked or shorter than its Content-Length, is
// answered 408 within body_timeout, and the connection is closed.
func TestSlowBodyIsAnswered(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode whole\n\t\t\tbody_timeout 1s\n")
	addr := strings.TrimPrefix(s.base, "http://")
	for _, c := range []struct{ name, head, part string }{
		{"chunked", "Transfer-Encoding: chunked\r\n", "10\r\n{\"prompt\":\"the \r\n"},
		{"short", "Content-Length: 100\r\n", `{"prompt":"the `},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := metricValue(t, "caddy_mlc_clients_dropped_total", "reason", "slow_body")
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s\r\n%s", addr, c.head, c.part)
			begin := time.Now()
			_ = conn.SetReadDeadline(begin.Add(30 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("status %d, close %v, want 408 and the connection closed", resp.StatusCode, resp.Close)
			}
			if took := time.Since(begin); took > 10*time.Second {
				t.Errorf("answered after %v with body_timeout 1s", took)
			}
			if _, err := br.ReadByte(); err == nil {
				t.Error("the connection stayed open after the 408")
			}
			if d := metricValue(t, "caddy_mlc_clients_dropped_total", "reason", "slow_body") - before; d != 1 {
				t.Errorf("clients_dropped_total{reason=slow_body} grew by %v", d)
			}
		})
	}
	// A body that arrives in time is served on the same kind of
	// connection as before: the deadline was lifted once it was read.
	st, err := s.stream(context.Background(), s.base, greedy("the old king", 8))
	if err != nil || !st.done {
		t.Fatalf("a normal stream after slow bodies: %v %+v", err, st)
	}
}

// Streaming clients that stop reading are let go after client_timeout:
// the engines stop generating for them and free their KV while the
// clients still hold their connections, and a normal client is served
// meanwhile.
func TestStalledClientsAreLetGo(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tclient_timeout 1s\n")
	addr := strings.TrimPrefix(s.base, "http://")
	before := metricValue(t, "caddy_mlc_clients_dropped_total", "reason", "stalled")
	const clients = 6
	body := mustJSON(map[string]any{"prompt": "a long long story about the sea", "max_tokens": 4000, "temperature": 0, "stream": true})
	for range clients {
		testnet.StalledClient(t, addr, fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body))
	}
	waitFor(t, "the decode engine to run the stalled streams", func() bool {
		return engineMetrics(t, s.engines[1])["running"] > 0
	})
	st, err := s.stream(context.Background(), s.base, greedy("the old king", 8))
	if err != nil || !st.done || st.text == "" {
		t.Fatalf("a normal client beside stalled ones: %v %+v", err, st)
	}
	waitFor(t, "the engines to let the stalled streams go", func() bool {
		for _, e := range s.engines {
			m := engineMetrics(t, e)
			if m["running"] != 0 || m["kv_pages_used"] != 0 || m["prepared"] != 0 {
				return false
			}
		}
		return true
	})
	if d := metricValue(t, "caddy_mlc_clients_dropped_total", "reason", "stalled") - before; d != clients {
		t.Errorf("clients_dropped_total{reason=stalled} grew by %v, want %d", d, clients)
	}
	for i, n := range liveInflight() {
		if n != 0 {
			t.Errorf("router in-flight count of engine %d is %d", i, n)
		}
	}
}
