package fleet

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// A rolling restart of three engines under 32 concurrent streams fails
// no request and changes no text: each engine is drained, restarted and
// back in rotation before the next, and the streams it had move to the
// others exactly.
func TestRollingRestartUnderLoad(t *testing.T) {
	for _, mode := range []string{router.ModeWhole, router.ModeDisagg} {
		t.Run(mode, func(t *testing.T) {
			c := startCore(t, 3, mode)
			const clients, prompts, maxTokens, calmRequests = 32, 8, 48, 64
			want := completiontest.References(t, c.engines[2], prompts, maxTokens)
			engines := spawnedOf(c.r)
			var pids []int
			for _, u := range engines {
				_, pid := c.fleet.Status(u.Index())
				pids = append(pids, pid)
			}
			movedBefore := migrated(t)

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
						got, err := completiontest.Stream(c.base, completiontest.Greedy(completiontest.Tale(i), maxTokens), func() {})
						switch {
						case err != nil:
							errs <- fmt.Errorf("client %d, request %d: %w", k, n, err)
							return
						case got.Text != want[i] || got.Finish != protocol.FinishLength || got.Usage == nil || got.Usage.CompletionTokens != maxTokens:
							errs <- fmt.Errorf("client %d, prompt %d: finish %q usage %+v\n got  %q\n want %q", k, i, got.Finish, got.Usage, got.Text, want[i])
							return
						}
						mu.Lock()
						if inRoll {
							during = append(during, got.TTFT)
						} else {
							before = append(before, got.TTFT)
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
			err := c.lc.rollingRestart(t.Context(), engines, 50*time.Millisecond, func(string, bool) {})
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
				if st, pid := c.fleet.Status(u.Index()); st != engine.StateReady || pid == pids[i] || u.OutOfRotation() {
					t.Errorf("engine %d after the roll: %v, pid %d (was %d), draining %v", i, st, pid, pids[i], u.OutOfRotation())
				}
			}
			p99b, p99d := p99(before), p99(during)
			t.Logf("roll of 3 engines in %v under %d streams: %d requests, %d failed, %v attempts moved; TTFT p99 %v before (%d), %v during (%d)",
				took.Round(time.Millisecond), clients, served.Load(), failed,
				migrated(t)-movedBefore,
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
