package router

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A rolling restart of three engines under 32 concurrent streams fails
// no request and changes no text: each engine is drained, restarted and
// back in rotation before the next, and the streams it had move to the
// others exactly.
func TestRollingRestartUnderLoad(t *testing.T) {
	for _, mode := range []string{ModeWhole, ModeDisagg} {
		t.Run(mode, func(t *testing.T) {
			c := startCore(t, 3, Config{Mode: mode}, nil)
			const clients, prompts, maxTokens, calmRequests = 32, 8, 48, 64
			want := references(c, c.engines[2], prompts, maxTokens)
			engines := c.r.spawnedEngines()
			var pids []int
			for _, u := range engines {
				_, pid := u.status()
				pids = append(pids, pid)
			}
			migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))

			var rolling, stop atomic.Bool
			var served atomic.Int64
			calm := make(chan struct{})
			calmOnce := sync.OnceFunc(func() { close(calm) })
			var mu sync.Mutex
			var before, during []time.Duration
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for k := range clients {
				wg.Go(func() {
					defer calmOnce() // a client that failed does not hold the roll
					for n := k; !stop.Load(); n++ {
						i := n % prompts
						inRoll := rolling.Load()
						got, err := streamUsage(c.base, greedy(drainPrompt(i), maxTokens), func() {})
						switch {
						case err != nil:
							errs <- fmt.Errorf("client %d, request %d: %w", k, n, err)
							return
						case got.text != want[i] || got.finish != protocol.FinishLength || got.usage == nil || got.usage.CompletionTokens != maxTokens:
							errs <- fmt.Errorf("client %d, prompt %d: finish %q usage %+v\n got  %q\n want %q", k, i, got.finish, got.usage, got.text, want[i])
							return
						}
						mu.Lock()
						if inRoll {
							during = append(during, got.ttft)
						} else {
							before = append(before, got.ttft)
						}
						mu.Unlock()
						if served.Add(1) >= calmRequests {
							calmOnce()
						}
					}
				})
			}
			<-calm
			rolling.Store(true)
			begin := time.Now()
			err := rollingRestart(t.Context(), engines, 50*time.Millisecond, func(string, bool) {})
			took := time.Since(begin)
			stop.Store(true)
			wg.Wait()
			close(errs)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for err := range errs {
				failed++
				t.Error(err)
			}
			for i, u := range engines {
				if ready, pid := u.status(); !ready || pid == pids[i] || u.draining() {
					t.Errorf("engine %d after the roll: ready %v, pid %d (was %d), draining %v", i, ready, pid, pids[i], u.draining())
				}
			}
			p99b, p99d := p99(before), p99(during)
			t.Logf("roll of 3 engines in %v under %d streams: %d requests, %d failed, %v attempts moved; TTFT p99 %v before (%d), %v during (%d)",
				took.Round(time.Millisecond), clients, served.Load(), failed,
				testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))-migrated,
				p99b.Round(time.Millisecond), len(before), p99d.Round(time.Millisecond), len(during))
			if len(during) == 0 {
				t.Error("no request was served during the roll")
			}
		})
	}
}

// p99 is the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}
