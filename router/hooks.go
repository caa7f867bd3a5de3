package router

import (
	"errors"
	"sync/atomic"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Observer is implemented by a policy that learns from what happens to
// the requests it routes: the router calls its hooks at the points of a
// request's life that they name, instead of anything writing the policy's
// state behind its back. The router's own bookkeeping hangs on the same
// hooks (the prefix index of a policy that reads Candidate.PrefixHit).
//
// A route is one engine's part in one attempt of a request. For every
// route the router calls Routed first, FirstToken when it happens, and
// always exactly one of Finished or Failed last: what Routed counts,
// Finished or Failed may count back. The hooks of one route are called
// in that order from one goroutine; those of different routes,
// concurrently. They run on the request's path: they must be quick and
// must not block.
//
// Observer's methods are the lifecycle and stay as they are; hooks that
// come later (MatchObserver is one) are interfaces of their own, which a
// policy implements if it wants them.
type Observer interface {
	// Routed is called when the router sends the attempt to the engine,
	// before its first call there: the completion (whole mode, or
	// a decode engine that prefills the request itself), the prep_recv
	// of a decode engine, the remote_send of a prefill engine. An engine
	// chosen and then not used (a prefill engine passed over for being
	// busy) is never routed.
	Routed(r *Route)
	// FirstToken is called at the engine's first token for the attempt,
	// in a streamed generation: its prefill is done. Never for a prefill
	// engine, nor for a whole (non-streamed) answer, whose tokens all
	// come with Finished.
	FirstToken(r *Route)
	// Finished is called when the engine's part ended well: a
	// remote_send acknowledged, a generation that ended with its finish
	// reason (a preemption included: the engine ended the request for
	// want of KV memory, and the next attempt resumes it), or that the
	// router stopped because the choice was complete (a stop string). u
	// is the engine's final usage (of a remote_send, its acknowledgement's:
	// no tokens, and what its cache held of the window as CachedTokens),
	// nil when it sent none.
	Finished(r *Route, u *Usage)
	// Failed is called when the engine's part ended otherwise: err is
	// the engine's failure (an error answer, a broken or malformed
	// stream, silence past engine_timeout), the client's going away, or
	// ErrRouteDropped.
	Failed(r *Route, err error)
}

// MatchObserver is implemented by an Observer that wants to know what an
// engine's prefix cache held before it generates.
type MatchObserver interface {
	// Matched is called, between Routed and the end of the route, when
	// the engine says how many tokens of the prompt its prefix cache
	// held: a decode engine's prep_recv answer (disagg mode).
	Matched(r *Route, tokens int)
}

// ErrRouteDropped is the error of a route the router gave up without a
// failure of its own: the attempt failed on another engine (the prefill
// engine's remote_send, say, which leaves the decode engine's part
// unfinished), or was abandoned before the engine was called.
var ErrRouteDropped = errors.New("the router dropped the call")

// Route is one engine's part in one attempt of a request: what the hooks
// of an Observer are about. Its pointer is the same from Routed to
// Finished or Failed, so an observer may key state by it.
type Route struct {
	Engine  Engine
	Request *Request
	// Role is what the engine was chosen for (see Candidate.Role).
	Role string

	prefix  prefixNote  // the prefix index's bookkeeping
	latency latencyNote // the latency model's
	cache   cacheNote   // the cache accounting's
}

// Usage is what an engine reported of its work on a request, in its
// final usage.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is how many prompt tokens the engine found in its
	// prefix cache; -1 when it did not say (the built-in engine does).
	CachedTokens int
}

// usageOf is the observers' view of an engine's usage; nil for none.
func usageOf(u *protocol.Usage) *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: -1}
	if n, ok := protocol.CachedTokensOf(u); ok {
		out.CachedTokens = n
	}
	return out
}

// observers are the hooks a router calls: its policy's, if it is an
// Observer, and those of the router's own bookkeeping.
type observers []Observer

// routeState is a lease's route, its hooks and where it stands. Only a
// router with observers keeps one: for the others every hook is a no-op.
type routeState struct {
	route Route
	hooks observers
	sent  bool        // Routed was called
	first bool        // FirstToken was called
	ended atomic.Bool // Finished or Failed was called
}

// routed sends the attempt to the lease's engine: the observers' Routed.
// Once per lease.
func (l *lease) routed() {
	if l.sent || len(l.hooks) == 0 {
		return
	}
	l.sent = true
	for _, o := range l.hooks {
		o.Routed(&l.route)
	}
}

// matched reports the engine's prefix cache match, in prompt tokens.
func (l *lease) matched(tokens int) {
	if !l.sent || l.ended.Load() {
		return
	}
	for _, o := range l.hooks {
		if m, ok := o.(MatchObserver); ok {
			m.Matched(&l.route, tokens)
		}
	}
}

// firstTokenHooks reports the engine's first token, once.
func (l *lease) firstTokenHooks() {
	if !l.sent || l.first || l.ended.Load() {
		return
	}
	l.first = true
	for _, o := range l.hooks {
		o.FirstToken(&l.route)
	}
}

// finish ends the route well, with the engine's final usage if any.
func (l *lease) finish(u *protocol.Usage) {
	if !l.sent || !l.ended.CompareAndSwap(false, true) {
		return
	}
	view := usageOf(u)
	for _, o := range l.hooks {
		o.Finished(&l.route, view)
	}
}

// fail ends the route with err; nothing once it ended.
func (l *lease) fail(err error) {
	if !l.sent || !l.ended.CompareAndSwap(false, true) {
		return
	}
	for _, o := range l.hooks {
		o.Failed(&l.route, err)
	}
}
