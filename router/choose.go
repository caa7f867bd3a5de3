package router

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// lease is an engine chosen for an attempt, held until its owner, the
// strategy that acquired it, releases it (deferred, in one place): the
// engine's process, the hold that counts the call in the engine's load,
// and the route the observers hear of. What becomes of the calls made on
// it (served, failed, the first token, the final usage) its owner reports
// through it; the engine client knows only where the engine is.
type lease struct {
	proc
	unhold  func() // counts the call back
	started func() // at the call's first token; nil when nothing counts it
	// cancel is the attempt's context on the engine, which a drain's end
	// cancels (see bind); nil when it is not bound.
	cancel context.CancelCauseFunc
	tier   Tier // the tier it was chosen in
	routeState
}

// firstToken reports the call's first token: its prefill is done.
func (l *lease) firstToken() {
	if l.started != nil {
		l.started()
	}
	l.firstTokenHooks()
}

// release ends the lease: a route that has not ended by then fails with
// err, or ErrRouteDropped when err is nil (the attempt went on without
// this engine, or was abandoned before calling it), and the call is
// counted back. Its owner defers it, so the count comes back on success,
// error, retry, disconnect and panic alike; it is idempotent.
func (l *lease) release(err error) {
	if err == nil {
		err = ErrRouteDropped
	}
	l.fail(err)
	l.unbind()
	if l.unhold != nil {
		l.unhold()
	}
}

// pickOptions say what a call needs.
type pickOptions struct {
	avoid     map[string]bool // engine processes that failed this request (avoidKey)
	req       *Request        // the attempt, for the policy and the observers
	needPages int             // KV pages the call will hold, 0 if unknown
	exclude   *Upstream       // not this engine (the decode engine, when choosing a prefill engine)
	noBroken  bool            // never an engine whose breaker is open (there is a fallback)
}

// candidate is an engine that may be chosen, with the process it runs.
type candidate struct {
	*Upstream
	pid int
}

// pick chooses the engine of role (engine.RolePrefill, engine.RoleDecode,
// or "" for any engine) for a call and holds it, or returns nil when none
// is ready. Only engines their fleet says are ready, and that no operator
// drains, are candidates; among
// them the breaker, the request's own failures and the KV room sort them
// into tiers, and the router's selection policy chooses in the best tier.
// An engine whose breaker is open is taken as a last resort, when nothing
// else is ready: an answer from a doubtful engine beats a 503.
func (r *Router) pick(role string, o pickOptions) *lease {
	cands := r.candidates(role)
	if len(cands) == 0 {
		return nil
	}
	now := time.Now()
	r.pickMu.Lock()
	defer r.pickMu.Unlock()
	var tiers [tierNone][]candidate
	for _, u := range cands {
		if u == o.exclude || u.OutOfRotation() {
			continue
		}
		ready, pid := u.status()
		if !ready {
			continue
		}
		tier := TierGood
		switch {
		case u.breaker.state(pid) == breakerOpen:
			if o.noBroken {
				continue
			}
			tier = tierBroken
		case len(o.avoid) > 0 && o.avoid[avoidKey(u.addr, pid)]:
			tier = TierAvoided
		case u.saturated(now, o.needPages):
			tier = TierSaturated
		}
		tiers[tier] = append(tiers[tier], candidate{u, pid})
	}
	for tier, cs := range tiers {
		if len(cs) == 0 {
			continue
		}
		var best candidate
		if Tier(tier) == tierBroken {
			best = leastBroken(cs)
		} else {
			best = r.choose(role, Tier(tier), cs, o.req, now)
		}
		if r.readsPrefixes {
			notePrefixMove(r.metrics, role, o.req, tiers[:], best)
		}
		best.breaker.admit(best.pid)
		l := &lease{proc: proc(best), tier: Tier(tier)}
		l.unhold, l.started = best.hold()
		if len(r.observers) > 0 {
			l.hooks = r.observers
			l.route = Route{Engine: best.Upstream, Request: o.req, Role: RoleName(role)}
		}
		return l
	}
	return nil
}

// choose has the router's policy choose among cs, engines of one tier.
// The policy sees them from a rotating offset, so that ties go round.
func (r *Router) choose(role string, tier Tier, cs []candidate, req *Request, now time.Time) candidate {
	if req == nil {
		req = &Request{}
	}
	first := int(r.rotation.Add(1) % uint64(len(cs)))
	name := RoleName(role)
	var chain []uint64
	if r.readsPrefixes {
		chain = windowChain(role, req)
	}
	views := make([]Candidate, len(cs))
	for k := range cs {
		c := cs[(first+k)%len(cs)]
		views[k] = c.view(now, name, tier)
		if chain != nil {
			views[k].PrefixHit = c.prefixes.match(chain)
		}
		if r.readsLatency {
			v := &views[k]
			v.TTFT, v.TPOT, v.IdleTTFT = c.predict(now, len(req.Prompt)-max(v.PrefixHit, 0))
		}
	}
	i, outcome := r.sessionChoice(req, role, views, now)
	if i < 0 {
		i = r.policy.Choose(req, views)
	}
	if i < 0 || i >= len(cs) {
		i = 0
	}
	if outcome != "" {
		if outcome != sessionHome && views[i].SessionHome {
			outcome = sessionHome // the policy chose its engine all the same
		}
		r.metrics.cache.sessions.WithLabelValues(r.Model, name, outcome).Inc()
	}
	if chain != nil {
		r.metrics.countPrefixHit(r.Model, views[i], len(req.Prompt))
	}
	return cs[(first+i)%len(cs)]
}

// candidates returns the engines of role the router may use: its fleet's
// endpoints of that role, and those its dynamic sources found.
func (r *Router) candidates(role string) []*Upstream {
	var out []*Upstream
	if lf := r.handle.get(); lf != nil {
		for _, i := range r.roles[role] {
			out = append(out, lf.upstreams[i])
		}
	}
	if r.dynamic != nil {
		out = append(out, r.dynamic.Engines(role)...)
	}
	return out
}

// leastBroken is the least bad of engines whose breakers are open: fewest
// failures in a row, then the first to cool down.
func leastBroken(cs []candidate) candidate {
	best := cs[0]
	bestFails, bestReopen := best.breaker.badness()
	for _, c := range cs[1:] {
		fails, reopen := c.breaker.badness()
		if fails < bestFails || fails == bestFails && reopen.Before(bestReopen) {
			best, bestFails, bestReopen = c, fails, reopen
		}
	}
	return best
}

// avoidKey names an engine process in pickOptions.avoid: an engine
// restarted is another process, and is not avoided for its predecessor's
// failures (as its breaker does not inherit them).
func avoidKey(addr string, pid int) string { return addr + "#" + strconv.Itoa(pid) }

// kvPageTokens is the tokens per KV page of MLC's engines (and of the
// built-in engine): what a prompt's KV need is estimated in.
const kvPageTokens = 16

// pagesFor estimates the KV pages a request of n tokens holds.
func pagesFor(n int) int { return (n + kvPageTokens - 1) / kvPageTokens }

// readyGenerating counts the generating engines ready now.
func (r *Router) readyGenerating() int {
	n := 0
	for _, u := range r.candidates(r.strategy.generatingRole()) {
		if ok, _ := u.status(); ok && !u.OutOfRotation() {
			n++
		}
	}
	return n
}

// Defaults of the wait for an engine.
const (
	// DefaultQueueTimeout is how long a request waits for an engine when
	// none is ready: enough for a crashed built-in engine to restart
	// (backoff starts at 200 ms) and for the moment between old and new
	// engines in a reload; a real model that loads its weights for
	// minutes outlasts it, and its clients get a 503 with Retry-After
	// rather than a hang.
	DefaultQueueTimeout = 30 * time.Second
	// DefaultQueueSize bounds the requests waiting at once per router;
	// more get a 503 at once.
	DefaultQueueSize = 1024
	// retryAfter is what a 503 tells the client.
	retryAfter = 2 * time.Second
)

// noEngineError is returned when no engine of a needed role became ready
// within the queue timeout, when the queue is full, or when the engines
// failed to start.
type noEngineError struct {
	role   string
	waited time.Duration
	full   bool
	cause  error // the engines' start failure
}

func (e *noEngineError) Error() string {
	switch {
	case e.cause != nil:
		return fmt.Sprintf("no %s engine: %v", e.role, e.cause)
	case e.full:
		return fmt.Sprintf("no %s engine is ready and the queue of waiting requests is full", e.role)
	}
	return fmt.Sprintf("no %s engine became ready in %v", e.role, e.waited.Round(time.Millisecond))
}

// apiError is the answer to a client whose request found no engine.
func (e *noEngineError) apiError() *protocol.Error {
	err := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "%s; try again shortly", e).WithCode("engine_unavailable")
	err.RetryAfter = retryAfter
	return err
}

// acquire holds an engine of role for a call. While none is ready it
// waits, in a queue bounded by queue_size, for up to queue_timeout: an
// engine restarting, the engines of a config starting (whichever of
// Caddy's apps starts first), the moment between old and new engines in a
// reload, dynamic engines not found yet. It returns errDraining when the
// router was replaced by a reload: the attempt goes to its successor.
func (r *Router) acquire(ctx context.Context, role string, o pickOptions) (*lease, error) {
	if r.handedOver() {
		return nil, errDraining
	}
	if l := r.pick(role, o); l != nil {
		return l, nil
	}
	if r.queued.Add(1) > int64(r.QueueSize) {
		r.queued.Add(-1)
		return nil, &noEngineError{role: role, full: true}
	}
	r.metrics.queued.Inc()
	begin := time.Now()
	defer func() {
		r.queued.Add(-1)
		r.metrics.queued.Dec()
		r.metrics.queueWait.Observe(time.Since(begin).Seconds())
		engineWaitOf(ctx).since(begin)
	}()
	timeout := time.NewTimer(time.Duration(r.QueueTimeout))
	defer timeout.Stop()
	for {
		changed := r.live.changes.wait()
		if r.handedOver() {
			return nil, errDraining
		}
		if lf := r.handle.get(); lf != nil {
			if err := lf.failed(); err != nil && r.dynamic == nil {
				return nil, &noEngineError{role: role, cause: err}
			}
		}
		if l := r.pick(role, o); l != nil {
			return l, nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			return nil, &noEngineError{role: role, waited: time.Since(begin)}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// handedOver reports that a reload replaced r by a newer router, which
// takes its new work.
func (r *Router) handedOver() bool {
	return r.retired.Load() && r.next.Load() != nil
}

// newRequest is the policies' view of an attempt.
func (r *Router) newRequest(ctx context.Context, req *protocol.CompletionRequest) *Request {
	f := factsOf(ctx)
	q := &Request{Model: r.Model, Prompt: req.Prompt.IDs, Tenant: f.Tenant, Band: f.Band, Targets: f.Targets, Session: sessionID(req.SessionKey)}
	if req.User != nil {
		q.ID = *req.User
	}
	return q
}

// setPolicy makes p the router's policy: the router keeps the prefix index
// and the latency models for a policy that reads them (the models also
// for a gate that admits against targets), routes sessions and accounts
// for the engines' caches while they keep one (cacheTracker), and calls
// the policy's hooks if it has any.
func (r *Router) setPolicy(p Policy) {
	r.policy, r.observers, r.readsPrefixes, r.readsLatency = p, nil, false, false
	if pr, ok := p.(PrefixReader); ok && pr.ReadsPrefixHit() {
		r.readsPrefixes = true
		r.observers = append(r.observers, prefixTracker{})
	}
	if lr, ok := p.(LatencyReader); ok && lr.ReadsLatency() || r.SLOAdmission.On() {
		r.readsLatency = true
		r.observers = append(r.observers, latencyTracker{})
	}
	if r.cachesPrefixes() {
		r.observers = append(r.observers, cacheTracker{sessions: r.sessionsActive(), ttl: r.Sessions.ttl()})
	}
	if o, ok := p.(Observer); ok {
		r.observers = append(r.observers, o)
	}
}

// unready says what the router lacks to serve, "" for nothing.
func (r *Router) unready() string {
	switch role := r.strategy.generatingRole(); {
	case r.readyGenerating() > 0, asleep(r):
		return ""
	case role == "":
		return "no engine is ready"
	default:
		return "no " + role + " engine is ready"
	}
}
