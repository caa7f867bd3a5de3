package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Two Caddy replicas share three engines. Replica A sends a heavy load,
// all of it to engine 0 (A lists only that one: the skew). Replica B,
// another process that lists all three, sees engine 0's load in what the
// engines report, and sends it (almost) nothing, so its time to first
// token stays about what it is without the skew.
func TestReplicasBalanceOnEngineLoad(t *testing.T) {
	ports := testnet.FreePorts(t, 6)
	engines := ports[:3]
	var eps []string
	for _, p := range engines {
		eps = append(eps, fmt.Sprintf("127.0.0.1:%d", p))
	}
	// Engine 0 runs one sequence at a time: A's load queues there (the
	// busy engine a replica must avoid) without taking this machine's
	// cores from the others, which B's time to first token would show.
	startEngineProc(t, eps[0], nil, "--overrides", "max_num_sequence=1")
	startEngineProc(t, eps[1], nil)
	startEngineProc(t, eps[2], nil)
	aPort, bPort, bAdmin := ports[3], ports[4], ports[5]

	// Replica B: another process (this test binary, as `caddy run`).
	var cf strings.Builder
	cf.WriteString(fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n", bAdmin, bPort))
	for _, ep := range eps {
		cf.WriteString("\t\tendpoint " + ep + " external\n")
	}
	cf.WriteString("\t}\n}\n")
	file := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(file, []byte(cf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	b := exec.Command(exe, "run", "--config", file, "--adapter", "caddyfile")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Process.Kill()
		_ = b.Wait()
	})
	// Replica A: this process, engine 0 only.
	reloadSite(t, aPort, "\t\tmode whole\n\t\tendpoint "+eps[0]+" external\n")
	t.Cleanup(func() { stopCaddy(t) })

	bBase := fmt.Sprintf("http://127.0.0.1:%d", bPort)
	s := &site{t: t, base: bBase, client: httpClient()}
	measure := func() (p50, mean time.Duration, shares []int64) {
		before := engineRequestsOf(t, bAdmin)
		var ttfts []time.Duration
		var sum time.Duration
		for i := range 30 {
			st, err := s.stream(context.Background(), bBase, greedy(fmt.Sprintf("replica b %d: the harbour at dawn", i), 8))
			if err != nil || !st.done {
				t.Fatalf("replica B: %v", err)
			}
			ttfts = append(ttfts, st.firstAfter)
			sum += st.firstAfter
		}
		after := engineRequestsOf(t, bAdmin)
		for i := range after {
			shares = append(shares, after[i]-before[i])
		}
		slices.Sort(ttfts)
		return ttfts[len(ttfts)/2], sum / time.Duration(len(ttfts)), shares
	}
	waitAnswers(t, bBase) // B's router answers /v1/models once it runs
	measure()             // warm up B's connections and the engines
	calmP50, calmMean, calm := measure()

	// The skew: 6 streams through A, all on engine 0, until B is measured.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	a := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", aPort), client: httpClient()}
	for i := range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = a.stream(context.Background(), a.base, greedy(fmt.Sprintf("replica a %d: a long tale of the sea", i), 400))
			}
		})
	}
	waitEngineWaiting(t, eps[0], 4)
	waitReported(t, bAdmin, 0, 5) // B learns it from the engine
	skewP50, skewMean, skewed := measure()
	close(stop)
	wg.Wait()

	t.Logf("replica B, TTFT p50/mean: %v/%v calm, %v/%v with A's load on engine 0; B's requests per engine: %v calm, %v skewed",
		calmP50, calmMean, skewP50, skewMean, calm, skewed)
	total := skewed[0] + skewed[1] + skewed[2]
	if skewed[0]*10 > total {
		t.Errorf("replica B sent %d of its %d requests to the busy engine", skewed[0], total)
	}
	// The engines share this machine's cores with A's load, so B's own
	// engines are slower too: the bound leaves room for that.
	if skewP50 > calmP50*3/2+20*time.Millisecond {
		t.Errorf("replica B's TTFT p50 went from %v to %v under A's skew", calmP50, skewP50)
	}
}

// engineRequestsOf returns the request count of each engine of the
// router behind an admin endpoint.
func engineRequestsOf(t *testing.T, adminPort int) []int64 {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(adminPort) + "/mlc/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st []fleet.ModelStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st) != 1 {
		t.Fatalf("admin status: %v %+v", err, st)
	}
	var out []int64
	for _, e := range st[0].Engines {
		out = append(out, e.Requests)
	}
	return out
}

// waitReported waits until the router behind an admin endpoint has heard
// from engine i that it runs at least n sequences.
func waitReported(t *testing.T, adminPort, i, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(adminPort) + "/mlc/engines")
		if err != nil {
			t.Fatal(err)
		}
		var st []fleet.ModelStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || len(st) != 1 {
			t.Fatalf("admin status: %v", err)
		}
		if l := st[0].Engines[i].Load; l != nil && l.Running+l.Waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router never heard engine %d's load", i)
		}
		time.Sleep(20 * time.Millisecond) // the router polls its engines on an interval
	}
}

// waitEngineWaiting waits until the engine at addr has at least n
// sequences waiting.
func waitEngineWaiting(t *testing.T, addr string, n float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for engineMetrics(t, "http://"+addr)["waiting"] < n {
		if time.Now().After(deadline) {
			t.Fatalf("engine %s never ran %v sequences", addr, n)
		}
		time.Sleep(20 * time.Millisecond) // A's clients starting
	}
}
