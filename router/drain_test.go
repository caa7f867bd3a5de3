package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Draining an engine with a grace of 0 under 16 streams moves every
// stream on it to the other engines at once: each finishes with the text
// one engine generates alone, its usage counted once; no new request
// reaches the drained engine, its KV pages return to 0, and undrained it
// takes requests again.
func TestDrainMigratesStreams(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		engines int // disagg: the first prefills, the others decode
	}{{ModeDisagg, 3}, {ModeWhole, 2}} {
		t.Run(tc.mode, func(t *testing.T) {
			c := startCore(t, tc.engines, Config{Mode: tc.mode}, nil)
			const streams, maxTokens = 16, 600
			last := tc.engines - 1
			drained := c.fleet.upstreams[last]
			want := references(c, c.engines[last], streams, maxTokens)
			migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))

			finish := exactDrainStreams(t, c, want, maxTokens) // every stream has text: each runs on an engine
			on := drained.inflight.Load()
			before := drained.requests.Load()
			drained.Drain(0)
			finish()
			if on == 0 {
				t.Fatal("no stream ran on the drained engine: the test tested nothing")
			}
			moved := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate)) - migrated
			t.Logf("%d of %d streams on the drained engine at the drain; %v attempts moved", on, streams, moved)
			if moved == 0 {
				t.Error("no attempt was moved")
			}
			for i := range 4 {
				if got := c.complete(c.base, greedy(drainPrompt(i), 8)); !strings.HasPrefix(want[i], got) {
					t.Errorf("after the drain, request %d: %q", i, got)
				}
			}
			if after := drained.requests.Load(); after != before {
				t.Errorf("the drained engine got %d new requests", after-before)
			}
			waitEngine(t, c.engines[last], "the drained engine's KV pages to return", func(m map[string]float64) bool {
				return m["kv_pages_used"] == 0 && m["running"] == 0 && m["prepared"] == 0
			})
			if st := drainStatusOf(c.r, drained.addr); st != DrainDrained {
				t.Errorf("status of the drained engine: %q", st)
			}
			if v := testutil.ToFloat64(sharedMetrics().drainState.WithLabelValues(drained.addr)); v != 2 {
				t.Errorf("caddy_mlc_engine_drain_state %v, want 2", v)
			}

			drained.Undrain()
			for i := range 4 {
				c.complete(c.base, greedy(drainPrompt(i), 4))
			}
			if drained.requests.Load() == before {
				t.Error("the engine back in rotation got no request")
			}
			if st := drainStatusOf(c.r, drained.addr); st != "" {
				t.Errorf("status of the undrained engine: %q", st)
			}
		})
	}
}

// exactDrainStreams streams drainPrompt(i) through c for each want[i],
// each checked exact, ended by its length and its usage counted once; it
// returns once every stream has text, and finish waits for them all and
// reports the failures.
func exactDrainStreams(t *testing.T, c *core, want []string, maxTokens int) (finish func()) {
	var started, wg sync.WaitGroup
	started.Add(len(want))
	errs := make(chan error, len(want))
	for i := range want {
		wg.Go(func() {
			got, err := streamUsage(c.base, greedy(drainPrompt(i), maxTokens), started.Done)
			switch {
			case err != nil:
				errs <- fmt.Errorf("stream %d: %w", i, err)
			case got.text != want[i]:
				errs <- fmt.Errorf("stream %d:\n got  %q\n want %q", i, got.text, want[i])
			case got.usage == nil || got.usage.CompletionTokens != maxTokens || got.finish != protocol.FinishLength:
				errs <- fmt.Errorf("stream %d: finish %q usage %+v, want %d tokens once", i, got.finish, got.usage, maxTokens)
			}
		})
	}
	started.Wait()
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// drainPrompt is the prompt of stream i.
func drainPrompt(i int) string {
	return fmt.Sprintf("tale %d of the %s harbour and the ships that never came back", i,
		[]string{"north", "grey", "windy", "silent"}[i%4])
}

// references asks the engine at url alone, n requests at once, for the
// greedy text of each drainPrompt.
func references(c *core, url string, n, maxTokens int) []string {
	c.t.Helper()
	want := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { want[i], errs[i] = completeText(url, greedy(drainPrompt(i), maxTokens)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	return want
}

// completeText posts a whole completion to url and returns its text.
func completeText(url string, body map[string]any) (string, error) {
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		return "", fmt.Errorf("%s: status %d, %v", url, resp.StatusCode, err)
	}
	return out.Choices[0].Text, nil
}

// drainStatusOf is the Drain of addr in the router's status.
func drainStatusOf(r *Router, addr string) string {
	for _, e := range r.Status().Engines {
		if e.Addr == addr {
			return e.Drain
		}
	}
	return "no such engine"
}

// streamedUsage is what a client saw of a streamed completion.
type streamedUsage struct {
	text, finish string
	usage        *protocol.Usage
	ttft         time.Duration // from the request to its first text
}

// streamUsage posts a streamed completion with usage to url, calls
// firstText once at its first text, and reads it to [DONE].
func streamUsage(url string, body map[string]any, firstText func()) (streamedUsage, error) {
	var out streamedUsage
	begin := time.Now()
	first := sync.OnceFunc(func() {
		out.ttft = time.Since(begin)
		firstText()
	})
	defer first() // a stream that failed early does not hold the others
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("status %d", resp.StatusCode)
	}
	var sb strings.Builder
	sse := protocol.NewSSEReader(resp.Body, 0)
	for {
		data, err := sse.Next()
		if err != nil {
			return out, fmt.Errorf("the stream ended without [DONE]: %w", err)
		}
		if protocol.IsDone(data) {
			out.text = sb.String()
			return out, nil
		}
		if e := protocol.ParseError(0, data); e != nil {
			return out, e
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return out, err
		}
		if chunk.Usage != nil {
			out.usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Text != "" {
				sb.WriteString(ch.Text)
				first()
			}
			if r := ch.Finished(); r != "" {
				out.finish = r
			}
		}
	}
}

// engineMetrics asks the engine at url for its metrics
// (query_engine_metrics).
func engineMetrics(t testing.TB, url string) map[string]float64 {
	t.Helper()
	extra, err := engine.QueryLoad(context.Background(), &http.Client{Timeout: 10 * time.Second}, url)
	if err != nil {
		t.Fatalf("engine metrics: %v", err)
	}
	m := map[string]float64{}
	for k, v := range extra {
		var f float64
		if json.Unmarshal(v, &f) == nil {
			m[k] = f
		}
	}
	return m
}

// waitEngine polls the engine's metrics (another process's state, which
// nothing notifies) until cond holds.
func waitEngine(t testing.TB, url, what string, cond func(map[string]float64) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for m := engineMetrics(t, url); !cond(m); m = engineMetrics(t, url) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A drain with a grace lets the streams on the engine finish there: none
// moves, and the engine is drained once they have ended.
func TestDrainGraceLetsStreamsFinish(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeWhole}, nil)
	const streams, maxTokens = 4, 300
	drained := c.fleet.upstreams[1]
	want := references(c, c.engines[1], streams, maxTokens)
	migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))
	var started, wg sync.WaitGroup
	started.Add(streams)
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			got, err := streamUsage(c.base, greedy(drainPrompt(i), maxTokens), started.Done)
			if err != nil || got.text != want[i] {
				errs <- fmt.Errorf("stream %d: %v\n got  %q\n want %q", i, err, got.text, want[i])
			}
		})
	}
	started.Wait()
	on := drained.inflight.Load()
	drained.Drain(time.Minute)
	if err := drained.WaitDrained(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if on == 0 {
		t.Fatal("no stream ran on the drained engine: the test tested nothing")
	}
	if moved := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate)) - migrated; moved != 0 {
		t.Errorf("%v attempts moved within the grace", moved)
	}
	if st := drainStatusOf(c.r, drained.addr); st != DrainDrained {
		t.Errorf("status %q once its streams ended", st)
	}
	drained.Undrain()
}
