package router

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// Cache accounting: for every route to an engine with a prefix cache, the
// prefix the router expected the engine to hold beside what the engine
// said it reused (prep_recv's prefix_matched_length, a remote_send's or a
// whole request's final usage). The expectation is the router's best
// knowledge when it routed: the prefix index's held pages (a
// prefix-reading policy's), and, for a session sent back to the engine
// of its last turn, the part of its last prompt the new one repeats
// (sessionMarks); 0 when it knew of nothing. An engine that reused less
// than expected lost what the router thought it held (it restarted, it
// evicted under pressure, an index went stale): the missed tokens, per
// engine, show a fleet whose affinity routing stopped hitting; reused
// beyond the expectation is a prefix the router did not know of (another
// router's traffic, a policy that keeps no index).

// cacheTracker is the router's Observer that routes sessions home and
// accounts for the engines' caches; a router installs it while the
// engines keep a prefix cache.
type cacheTracker struct {
	sessions bool // the router routes by sessions
	ttl      time.Duration
}

// Interface guards.
var (
	_ Observer      = cacheTracker{}
	_ MatchObserver = cacheTracker{}
)

// cacheNote is a route's bookkeeping for the accounting.
type cacheNote struct {
	expected int  // tokens of the prompt the engine was expected to hold
	set      bool // expected is set (Routed)
	counted  bool // the engine's report was counted
}

// Routed sets what the engine is expected to hold of the prompt, and
// makes the engine the session's.
func (t cacheTracker) Routed(r *Route) {
	q := r.Request
	if q == nil {
		return
	}
	expected := 0
	if r.prefix.tracked {
		expected = r.prefix.predicted
	}
	if q.Session != 0 && t.sessions {
		expected = max(expected, t.routeSession(r))
	}
	if r.Role != engine.RolePrefill {
		// An engine computes the prompt's last token whatever it holds.
		expected = min(expected, max(len(q.Prompt)-1, 0))
	}
	r.cache = cacheNote{expected: expected, set: true}
}

// routeSession records the route's engine as its session's, and returns
// what of the prompt the engine holds from the session's last turn when
// that went there too.
func (t cacheTracker) routeSession(r *Route) int {
	u := r.Engine.internal()
	live := u.pool.live
	now := time.Now()
	key := sessionKeyOf(r.Request, r.Role)
	chain := windowChain(r.Role, r.Request)
	held := 0
	if last, ok := live.sessions.home(key, now, t.ttl); ok && last.engine == u.addr {
		held = marksMatch(last.marks, chain)
	}
	entry := sessionEntry{key: key, engine: u.addr, marks: sessionMarks(chain), seen: now}
	live.sessions.set(entry)
	shareSession(live, entry)
	return held
}

// Matched counts the engine's prep_recv match.
func (cacheTracker) Matched(r *Route, tokens int) { account(r, tokens) }

// FirstToken does nothing.
func (cacheTracker) FirstToken(*Route) {}

// Finished counts what the engine's final usage says it reused, unless
// its prep_recv said first.
func (cacheTracker) Finished(r *Route, u *Usage) {
	if u != nil && u.CachedTokens >= 0 {
		account(r, u.CachedTokens)
	}
}

// Failed counts nothing: the engine said nothing of its cache.
func (cacheTracker) Failed(*Route, error) {}

// account counts a route's expectation against what its engine reused,
// once.
func account(r *Route, reused int) {
	c := &r.cache
	if !c.set || c.counted || r.Request == nil {
		return
	}
	c.counted = true
	u := r.Engine.internal()
	missed := max(c.expected-reused, 0)
	u.cacheCounts.add(c.expected, reused, missed)
	m := sharedMetrics().cache
	labels := prometheus.Labels{"model": r.Request.Model, "engine": u.addr}
	m.expected.With(labels).Add(float64(c.expected))
	m.reused.With(labels).Add(float64(reused))
	if missed > 0 {
		m.missed.With(labels).Add(float64(missed))
	}
}

// expectedCached is what the lease's engine was expected to hold of the
// prompt when it was routed; -1 when the router did not account for it.
func (l *lease) expectedCached() int {
	if !l.route.cache.set {
		return -1
	}
	return l.route.cache.expected
}

// cacheCounts are an engine's accounting totals since its Upstream was
// made, for operators (UpstreamStatus.Cache).
type cacheCounts struct {
	expected, reused, missed atomic.Int64
}

func (c *cacheCounts) add(expected, reused, missed int) {
	c.expected.Add(int64(expected))
	c.reused.Add(int64(reused))
	c.missed.Add(int64(missed))
}

// CacheStatus is an engine's cache accounting as operators see it (a
// part of GET /mlc/engines): over the routes to it that the engine
// reported on, the prompt tokens the routers expected it to hold, those
// it said it reused, and those expected but not reused.
type CacheStatus struct {
	Expected int64 `json:"expected_tokens"`
	Reused   int64 `json:"reused_tokens"`
	Missed   int64 `json:"missed_tokens"`
}

// status returns the totals, nil before the first route's report.
func (c *cacheCounts) status() *CacheStatus {
	st := &CacheStatus{Expected: c.expected.Load(), Reused: c.reused.Load(), Missed: c.missed.Load()}
	if *st == (CacheStatus{}) {
		return nil
	}
	return st
}

// newCacheAccountCounters returns caddy_mlc_prefix_expected_tokens_total,
// caddy_mlc_prefix_reused_tokens_total and
// caddy_mlc_prefix_missed_tokens_total.
func newCacheAccountCounters() (expected, reused, missed *prometheus.CounterVec) {
	expected = newCounterVec("prefix_expected_tokens_total",
		"Prompt tokens the router expected an engine to hold in its prefix cache when it routed a request there (the prefix index's, a session's last prompt), over the routes the engine then reported on, by model and engine.", "model", "engine")
	reused = newCounterVec("prefix_reused_tokens_total",
		"Prompt tokens engines said they reused from their prefix caches on the routes of caddy_mlc_prefix_expected_tokens_total (its difference from that is what the router did not foresee), by model and engine.", "model", "engine")
	missed = newCounterVec("prefix_missed_tokens_total",
		"Of caddy_mlc_prefix_expected_tokens_total, the tokens an engine did not reuse: it had lost them (a restart, an eviction, a stale index), by model and engine.", "model", "engine")
	return expected, reused, missed
}
