package caddymlc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// waitReplicaGauge waits until the Caddy behind an admin endpoint shows
// caddy_mlc_cluster_up v.
func waitReplicaGauge(t *testing.T, adminPort int, v int) {
	t.Helper()
	want := fmt.Sprintf("\ncaddy_mlc_cluster_up %d\n", v)
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", adminPort)); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica at admin port %d never showed caddy_mlc_cluster_up %d", adminPort, v)
		}
		time.Sleep(20 * time.Millisecond) // another process: polled
	}
}

// Three replicas over two engines, sharing budgets, prefixes and the
// engines' batch through Redis; 16 streams through them while Redis is
// SIGKILLed and restarted: no request fails, every text is the engine's
// own, and a replica's caddy_mlc_cluster_up goes 1, 0, 1.
func TestClusterSurvivesRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 7)
	engines := []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}
	for _, e := range engines {
		startEngineProc(t, e, nil)
	}
	opts := "\t\ttenant {http.request.header.X-Tenant}\n\t\tbudget * tokens_per_minute 100000000\n\t\tmax_inflight 4\n\t\tpolicy prefix_aware\n"
	admins := []int{ports[5], ports[6]}
	for i, admin := range admins {
		startReplica(t, replicaConfig(fmt.Sprintf("127.0.0.1:%d", admin), srv.Addr(), ports[3+i], opts, engines...))
	}
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[2], opts, engines...))
	waitClusterUp(t, liveCluster(t))
	bases := []string{fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	for i, admin := range admins {
		waitReplicaGauge(t, admin, 1)
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d", ports[3+i]))
		waitAnswers(t, bases[i+1])
	}

	s := &site{t: t, client: httpClient()}
	const streams = 16
	want := make([]string, streams)
	bodies := make([]func() map[string]any, streams)
	for i := range streams {
		prompt := fmt.Sprintf("stream %d of the cluster: tell a story", i)
		bodies[i] = func() map[string]any { return greedy(prompt, 24) }
		want[i] = reference(s, "http://"+engines[i%2], bodies[i]())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		failures []string
		served   = make([]int, streams)
		progress = make(chan struct{}, streams*1024)
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for i := range streams {
		wg.Add(1)
		goroutine.Go(zap.NewNop(), "a test stream", func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				base := bases[(i+n)%len(bases)]
				got, err := s.stream(ctx, base, bodies[i]())
				if ctx.Err() != nil {
					return
				}
				switch {
				case err != nil:
					fail("stream %d through %s: %v", i, base, err)
				case !got.done || got.text != want[i]:
					fail("stream %d through %s: text %q (done %v), want %q", i, base, got.text, got.done, want[i])
				default:
					mu.Lock()
					served[i]++
					mu.Unlock()
				}
				select {
				case progress <- struct{}{}:
				default:
				}
			}
		}, func(p any) { fail("stream %d panicked: %v", i, p) })
	}
	// rounds waits until every stream has been served n more times.
	rounds := func(n int, why string) {
		t.Helper()
		mu.Lock()
		from := append([]int(nil), served...)
		mu.Unlock()
		for {
			mu.Lock()
			ok := len(failures) == 0
			for i := range served {
				ok = ok && served[i] >= from[i]+n
			}
			nf := len(failures)
			mu.Unlock()
			if ok || nf > 0 {
				return
			}
			select {
			case <-progress:
			case <-ctx.Done():
				t.Fatalf("%s: the streams did not go on: %v", why, ctx.Err())
			}
		}
	}
	rounds(1, "Redis up")
	srv.Kill()
	waitReplicaGauge(t, admins[0], 0)
	rounds(2, "Redis killed")
	srv.Restart()
	waitReplicaGauge(t, admins[0], 1)
	waitClusterUp(t, liveCluster(t))
	rounds(2, "Redis back")
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, the first: %s", len(failures), failures[0])
	}
	total := 0
	for _, n := range served {
		total += n
	}
	t.Logf("%d requests served through three replicas across Redis's kill and restart", total)
}
