package router

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Agent sessions in the agents bench's shape (a head every session
// resends, a head of its own, a history that grows by a tool result each
// turn) on a disaggregated fleet whose two decode engines each hold a
// fraction of them, under prefix_aware, which piles sessions onto the
// engine that holds their head: the engines preempt again and again, and
// every request still completes, with the text one engine gives it
// alone. The built-in engine preempts the latest arrival, and the router
// sends each attempt with its request's first arrival, so a resumed
// request is not the next one preempted: preemption cannot livelock.
func TestAgentSessionsUnderKVPressureComplete(t *testing.T) {
	const sessions, turns, shared, own, tool, generate = 16, 4, 192, 64, 32, 48
	c := startCoreArgs(t, 3, Config{Mode: ModeDisagg}, PrefixAware{}, "--overrides", "max_total_seq_length=512")
	rng := rand.New(rand.NewPCG(7, 9))
	ids := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 10 + rng.IntN(900)
		}
		return out
	}
	head := ids(shared)
	prompts := make([][][]int, sessions) // by session, turn
	for s := range prompts {
		p := append(append([]int(nil), head...), ids(own)...)
		for range turns {
			prompts[s] = append(prompts[s], p)
			p = append(append([]int(nil), p...), ids(tool)...)
		}
	}
	// The references, one request at a time on one engine alone.
	want := make([][]string, sessions)
	for s := range prompts {
		for _, p := range prompts[s] {
			want[s] = append(want[s], c.complete(c.engines[1], greedy(p, generate)))
		}
	}
	preempted := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causePreempt))
	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns)
	for s := range sessions {
		wg.Go(func() {
			for turn, p := range prompts[s] {
				got, err := completiontest.Text(c.base, greedy(p, generate))
				if err != nil || got != want[s][turn] {
					errs <- fmt.Errorf("session %d turn %d: %v\n got  %q\n want %q", s, turn, err, got, want[s][turn])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causePreempt)) - preempted
	t.Logf("%d requests, %v resumed after a preemption", sessions*turns, n)
	if n == 0 {
		t.Error("no request was preempted: the KV caches were not under pressure, the test tested nothing")
	}
}

// A request its engine preempts every two tokens, far more often than
// max_attempts, completes all the same, exactly: each attempt delivers
// text, and only attempts in a row that deliver none count against
// max_attempts.
func TestPreemptedEveryFewTokensCompletes(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	const maxTokens = 3 * DefaultMaxAttempts
	want := c.complete(c.engines[0], greedy("a long answer preempted again and again", maxTokens))
	u := c.fleet.upstreams[0]
	front := httptest.NewServer(&preemptEvery{engine: u.url, texts: 2})
	t.Cleanup(front.Close)
	u.url = front.URL
	text, done := c.stream(greedy("a long answer preempted again and again", maxTokens))
	if !done || text != want {
		t.Fatalf("done %v, text %q, want %q", done, text, want)
	}
}

// preemptEvery is a proxy in front of an engine that preempts every
// streamed completion after texts text events.
type preemptEvery struct {
	engine string
	texts  int
}

func (p *preemptEvery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.engine+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if r.URL.Path != protocol.PathCompletions || !bytes.Contains(body, []byte(`"stream":true`)) || bytes.Contains(body, []byte("special_request")) {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	completiontest.PreemptStream(w, resp.Body, p.texts, func() bool { return true })
}
