package router

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// What a request's usage reports as cached (prompt_tokens_details.
// cached_tokens, input_tokens_details.cached_tokens,
// cache_read_input_tokens) is what the engines said they reused of its
// prompt, never an estimate:
//
//   - whole mode, and a disagg attempt the decode engine prefills itself:
//     the generating engine's final usage (protocol.CachedTokensOf);
//   - disagg: the window's tokens no engine computed. When the decode
//     engine's cache holds the whole window (prep_recv's
//     prefix_matched_length is its end) that is the window; otherwise the
//     prefill engine computed the window from its own cache's match,
//     which the built-in engine reports in remote_send's usage (see
//     reusedInWindow).
//
// The APIs that tell usage before the first token (Anthropic's
// message_start, the Responses API's response.created) tell the cached
// tokens there when they are known by then: in disagg mode the window's
// (prep_recv's prefix_matched_length, or the prefill engine's own match),
// in whole mode (and a disagg attempt the decode engine prefills itself)
// the built-in engine's first chunk (protocol.MatchedChunk). MLC's
// engines say it in their final usage only: the start then says 0, and
// the final usage (message_delta, response.completed) the count.
//
// A choice resumed after a preemption or a failure reports what its first
// attempt that said reused: the later attempts' reuse of the text already
// delivered is the router's business, not the client's prompt. With n > 1
// the request reports its first choice's. Unknown (an engine that says
// nothing, MLC's without metrics in its usage), the details are left out
// of chat and completions, and 0 elsewhere.

// reusedInWindow is what a disagg attempt that sent the window [0, end)
// reused: the prefill engine's own match of the window (it computed the
// rest) when its remote_send's usage says, else the decode engine's
// (prep_recv's prefix_matched_length: a lower bound MLC's engines leave
// it at).
func reusedInWindow(decMatched int, sent *protocol.Usage, end int) int {
	if n, ok := protocol.CachedTokensOf(sent); ok {
		return min(n, end)
	}
	return decMatched
}

// expectedInWindow is what the router expected of the engine whose count
// reusedInWindow takes: the prefill engine's, when its remote_send said,
// else the decode engine's; -1 when it did not account (cacheaccount.go).
func expectedInWindow(dec, pre *lease, sent *protocol.Usage, end int) int {
	if _, ok := protocol.CachedTokensOf(sent); ok {
		return min(pre.expectedCached(), end)
	}
	return min(dec.expectedCached(), end)
}

// reused is what the attempt's engines reused of its prompt, -1 unknown.
func (a *attempt) reused() int {
	if a.cached >= 0 {
		return a.cached
	}
	if n, ok := protocol.CachedTokensOf(a.usage); ok {
		return n
	}
	return -1
}

// noteReused keeps the first count of an attempt of the choice, and what
// the router expected of it.
func (j *choiceJob) noteReused(a *attempt) {
	if j.cached < 0 {
		j.cached, j.expected = a.reused(), a.expected
	}
}

// cachedAnnouncer is a sink whose answer tells the usage before its first
// token: it is told the cached tokens when they are known by then.
type cachedAnnouncer interface{ announceCached(tokens int) }

// announce tells the request's sink the first choice's cached tokens,
// once, as soon as an attempt knows them.
func (j *choiceJob) announce(a *attempt, out sink) {
	if j.index != 0 || j.announced || a.cached < 0 {
		return
	}
	j.announced = true
	if p, ok := out.(*parkingSink); ok {
		out = p.sink
	}
	if c, ok := out.(cachedAnnouncer); ok {
		c.announceCached(a.cached)
	}
}

// announceCached passes the count to the API's sink, under the lock.
func (o *outcomeSink) announceCached(tokens int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.sink
	if t, ok := s.(*thinkingSink); ok {
		s = t.out
	}
	if t, ok := s.(*toolCallSink); ok {
		s = t.out
	}
	if c, ok := s.(cachedAnnouncer); ok {
		c.announceCached(tokens)
	}
}

// cacheMetrics count the prompt tokens served and what of them the
// engines reused, and the sessions moved off the engine that held
// their prefix.
type cacheMetrics struct {
	prompt, cached *prometheus.CounterVec
	// moves counts requests routed away from the engine whose cache held
	// their longest prefix, by reason (see prefix moves in disaggprefix.go).
	moves *prometheus.CounterVec
	// sessions counts the routing of requests with a session, by
	// outcome (session.go).
	sessions *prometheus.CounterVec
	// expected, reused and missed are the cache accounting's
	// (cacheaccount.go).
	expected, reused, missed *prometheus.CounterVec
}

func newCacheMetrics() cacheMetrics {
	c := cacheMetrics{
		prompt: newCounterVec("prompt_tokens_total", "Prompt tokens of the requests served, by model.", "model"),
		cached: newCounterVec("cached_prompt_tokens_total", "The part of caddy_mlc_prompt_tokens_total the engines said they reused from their prefix caches (what usage reports as cached tokens), by model.", "model"),
		moves:  newCounterVec("prefix_moves_total", "Requests routed to another engine than the one whose cache held the longest prefix of their prompt, by reason (saturated: that engine was full or over the load the prefix was worth; unavailable: it could not take the request).", "reason"),
		sessions: newCounterVec("session_routes_total", "Engines chosen for requests that name a session (prompt_cache_key, metadata.user_id, the session header), by model, role and outcome (home: the engine of its last turn; new: none known; load: that engine was busier than the session balance allows; elsewhere: it could not take the request).",
			"model", "role", "outcome"),
	}
	c.expected, c.reused, c.missed = newCacheAccountCounters()
	return c
}

func (c cacheMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.prompt, c.cached, c.moves, c.sessions, c.expected, c.reused, c.missed}
}

// countCached counts a served request's prompt and cached tokens.
func (c cacheMetrics) countCached(model string, prompt, cached int) {
	c.prompt.WithLabelValues(model).Add(float64(prompt))
	if cached > 0 {
		c.cached.WithLabelValues(model).Add(float64(cached))
	}
}

// budgetCost is what a request costs its tenant's budget: its prompt,
// with the cached part weighted by weight (cached_token_weight), and what
// it generated. Rounded up: a request never costs less than its
// generated tokens and its uncached prompt.
func budgetCost(prompt, cached, generated int, weight float64) int64 {
	cached = min(max(cached, 0), prompt)
	w := float64(prompt-cached) + float64(cached)*weight
	return int64(math.Ceil(w)) + int64(generated)
}

// cachedWeight is CachedTokenWeight, 1 when unset.
func (c *Config) cachedWeight() float64 {
	if c.CachedTokenWeight == nil {
		return 1
	}
	return *c.CachedTokenWeight
}
