package router

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// hookRecorder is a selection policy for the tests: least_loaded's
// choice, and every hook it hears recorded in recorded.
type hookRecorder struct{ LeastLoaded }

// recorded is what the hookRecorders heard: the events of every route, in
// order, and a signal for each route that ended.
var recorded struct {
	sync.Mutex
	routes []*Route
	events map[*Route][]string
	ended  chan *Route
}

func resetRecorded() {
	recorded.Lock()
	defer recorded.Unlock()
	recorded.routes, recorded.events, recorded.ended = nil, map[*Route][]string{}, make(chan *Route, 16)
}

func record(r *Route, event string) {
	recorded.Lock()
	defer recorded.Unlock()
	if _, ok := recorded.events[r]; !ok {
		recorded.routes = append(recorded.routes, r)
	}
	recorded.events[r] = append(recorded.events[r], event)
}

func (hookRecorder) Routed(r *Route) { record(r, "routed "+r.Role+" "+r.Engine.Addr()) }

func (hookRecorder) Matched(r *Route, tokens int) { record(r, fmt.Sprintf("matched %d", tokens)) }

func (hookRecorder) FirstToken(r *Route) { record(r, "first token") }

func (hookRecorder) Finished(r *Route, u *Usage) {
	if u == nil {
		record(r, "finished")
	} else {
		record(r, fmt.Sprintf("finished %d+%d", u.PromptTokens, u.CompletionTokens))
	}
	recorded.ended <- r
}

func (hookRecorder) Failed(r *Route, err error) {
	record(r, "failed")
	if err == nil {
		record(r, "failed without an error")
	}
	recorded.ended <- r
}

// waitRoutes waits until n routes have ended and returns every route's
// events, in the order the routes were made.
func waitRoutes(t *testing.T, n int) [][]string {
	t.Helper()
	for range n {
		select {
		case <-recorded.ended:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for routes to end")
		}
	}
	recorded.Lock()
	defer recorded.Unlock()
	var out [][]string
	for _, r := range recorded.routes {
		out = append(out, recorded.events[r])
	}
	return out
}

// The router calls a policy's hooks along every route: in disagg mode the
// decode engine's (routed, what its cache matched, its first token, its
// usage) and the prefill engine's (routed, its remote_send acknowledged),
// with the same request.
func TestHooksFollowEveryRoute(t *testing.T) {
	s := startCore(t, 2, Config{Mode: ModeDisagg}, hookRecorder{})
	resetRecorded()
	prompt := seq(7, 40)
	if _, done := s.stream(greedy(prompt, 8)); !done {
		t.Fatal("stream not done")
	}
	got := waitRoutes(t, 2)
	pre, dec := strings.TrimPrefix(s.engines[0], "http://"), strings.TrimPrefix(s.engines[1], "http://")
	want := [][]string{
		{"routed decode " + dec, "matched 0", "first token", "finished 40+8"},
		{"routed prefill " + pre, "finished 0+0"}, // remote_send's usage counts no tokens
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("hooks heard %q, want %q", got, want)
	}
	recorded.Lock()
	routes := recorded.routes
	recorded.Unlock()
	if routes[0].Request != routes[1].Request || !slices.Equal(routes[0].Request.Prompt, prompt) ||
		!strings.HasSuffix(routes[0].Request.ID, "-0-1") || routes[0].Request.Model != "tiny" {
		t.Fatalf("the routes' requests: %+v, %+v", routes[0].Request, routes[1].Request)
	}
}

// A client that leaves mid-stream fails the decode engine's route, once:
// what a policy counted at Routed it counts back.
func TestHooksFailARouteTheClientLeft(t *testing.T) {
	s := startCore(t, 1, Config{Mode: ModeWhole}, hookRecorder{})
	resetRecorded()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"prompt":"a long long story","max_tokens":2000,"temperature":0,"stream":true}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), `"text":"`) {
	}
	cancel()
	for sc.Scan() {
	}
	resp.Body.Close()
	got := waitRoutes(t, 1)
	eng := strings.TrimPrefix(s.engines[0], "http://")
	if want := [][]string{{"routed any " + eng, "first token", "failed"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("hooks heard %q, want %q", got, want)
	}
}

// A policy sees each candidate as it stands: its calls, what it reported
// (while the report is recent) and its tier; an index it returns out of
// range chooses the first.
func TestPolicySeesCandidates(t *testing.T) {
	lf := externalFleet(t, 2)
	var seen []Candidate
	pol := choosing(func(_ *Request, cs []Candidate) int { seen = slices.Clone(cs); return 7 })
	r := testRouter(t, lf, pol)
	u0, u1 := lf.upstreams[0], lf.upstreams[1]
	release, _ := u0.hold()
	defer release()
	now := time.Now()
	u1.load.Store(&engineLoad{at: now, EngineLoad: protocol.EngineLoad{Running: 3, Waiting: 1, PagesFree: 10, PagesCached: 20, PagesTotal: 100}})
	l := r.pick("", pickOptions{})
	defer l.release(nil)
	if len(seen) != 2 || l.Upstream != seen[0].Engine.internal() {
		t.Fatalf("chose %s from %+v, want the first", l.addr, seen)
	}
	byAddr := map[string]Candidate{}
	for _, c := range seen {
		byAddr[c.Addr] = c
	}
	c0, c1 := byAddr[u0.addr], byAddr[u1.addr]
	if c0.InFlight != 1 || c0.Prefilling != 1 || c0.Others != 0 || !c0.Load.At.IsZero() || c0.Role != "any" || c0.Tier != TierGood || c0.PrefixHit != -1 {
		t.Fatalf("engine 0 seen as %+v", c0)
	}
	if c1.InFlight != 0 || c1.Others <= 0 || c1.Others > 4 || c1.Load.PagesUsed != 70 || c1.Load.PagesCached != 20 || c1.Load.Running != 3 {
		t.Fatalf("engine 1 seen as %+v", c1)
	}
	// A report older than three poll intervals says nothing of now.
	u1.load.Store(&engineLoad{at: now.Add(-loadStale), EngineLoad: protocol.EngineLoad{Running: 3, PagesTotal: 100}})
	l2 := r.pick("", pickOptions{})
	defer l2.release(nil)
	for _, c := range seen {
		if c.Addr == u1.addr && (c.Others != 0 || !c.Load.At.IsZero()) {
			t.Fatalf("a stale report seen: %+v", c)
		}
	}
}

// choosing is a Policy made of a function.
type choosing func(*Request, []Candidate) int

func (f choosing) Choose(req *Request, cs []Candidate) int { return f(req, cs) }
