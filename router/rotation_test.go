package router

import (
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
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
)

// An engine taken out of rotation under 16 streams, its attempts moved
// (a drain's end), moves every stream on it to the other engines at
// once: each finishes with the text one engine generates alone, its usage
// counted once; no new request reaches the engine, its KV pages return
// to 0, and put back it takes requests again.
func TestMoveAttemptsMigratesStreams(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		engines int // disagg: the first prefills, the others decode
	}{{ModeDisagg, 3}, {ModeWhole, 2}} {
		t.Run(tc.mode, func(t *testing.T) {
			c := startCore(t, tc.engines, Config{Mode: tc.mode}, nil)
			const streams, maxTokens = 16, 600
			last := tc.engines - 1
			drained := c.fleet.upstreams[last]
			want := completiontest.References(t, c.engines[last], streams, maxTokens)
			migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))

			finish := completiontest.ExactStreams(t, c.base, want, maxTokens) // every stream has text: each runs on an engine
			on := drained.inflight.Load()
			before := drained.requests.Load()
			drained.TakeOut()
			drained.MoveAttempts()
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
				if got := c.complete(c.base, greedy(completiontest.Tale(i), 8)); !strings.HasPrefix(want[i], got) {
					t.Errorf("after the drain, request %d: %q", i, got)
				}
			}
			if after := drained.requests.Load(); after != before {
				t.Errorf("the drained engine got %d new requests", after-before)
			}
			waitEngine(t, c.engines[last], "the drained engine's KV pages to return", func(m map[string]float64) bool {
				return m["kv_pages_used"] == 0 && m["running"] == 0 && m["prepared"] == 0
			})
			if err := drained.WaitIdle(t.Context()); err != nil || !drained.OutOfRotation() {
				t.Errorf("the drained engine: idle %v, out of rotation %v", err, drained.OutOfRotation())
			}

			drained.PutBack()
			for i := range 4 {
				c.complete(c.base, greedy(completiontest.Tale(i), 4))
			}
			if drained.requests.Load() == before {
				t.Error("the engine back in rotation got no request")
			}
			if drained.OutOfRotation() {
				t.Error("the engine put back is out of rotation")
			}
		})
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

// An engine out of rotation lets the streams on it finish there (a
// drain's grace): none moves, and the engine is idle once they have
// ended.
func TestOutOfRotationLetsStreamsFinish(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeWhole}, nil)
	const streams, maxTokens = 4, 300
	drained := c.fleet.upstreams[1]
	want := completiontest.References(t, c.engines[1], streams, maxTokens)
	migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))
	var started, wg sync.WaitGroup
	started.Add(streams)
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			got, err := completiontest.Stream(c.base, greedy(completiontest.Tale(i), maxTokens), started.Done)
			if err != nil || got.Text != want[i] {
				errs <- fmt.Errorf("stream %d: %v\n got  %q\n want %q", i, err, got.Text, want[i])
			}
		})
	}
	started.Wait()
	on := drained.inflight.Load()
	drained.TakeOut()
	if err := drained.WaitIdle(t.Context()); err != nil {
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
	drained.PutBack()
}
