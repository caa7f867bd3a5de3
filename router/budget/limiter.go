package budget

import (
	"context"
	"sync/atomic"
	"time"
)

// Options configure a Limiter.
type Options struct {
	Rules []Rule
	// Store keeps the buckets; nil is a new MemoryStore.
	Store Store
	// Fallback, when not nil, keeps the buckets while Store fails (a
	// store the replicas share, out of reach): the request is then
	// decided on the Fallback's buckets, each budget at 1/Replicas of its
	// limit, so that Replicas replicas left alone spend about the limit
	// together. Without it Store's errors are the caller's.
	Fallback Store
	// Replicas is how many replicas share Store (default 1).
	Replicas int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Limiter applies budgets to tenants. Its methods are safe for
// concurrent use.
type Limiter struct {
	store    Store
	fallback Store
	replicas int64
	now      func() time.Time
	rules    atomic.Pointer[ruleSet]
}

// New returns a Limiter of o's rules.
func New(o Options) (*Limiter, error) {
	l := &Limiter{store: o.Store, fallback: o.Fallback, replicas: int64(max(o.Replicas, 1)), now: o.Now}
	if l.store == nil {
		l.store = NewMemoryStore()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if err := l.SetRules(o.Rules); err != nil {
		return nil, err
	}
	return l, nil
}

// SetRules replaces the rules in place. Buckets are kept: a tenant's
// spending carries over to its new limit, and reservations made before
// settle against the rules of when they settle.
func (l *Limiter) SetRules(rules []Rule) error {
	s, err := newRuleSet(rules)
	if err != nil {
		return err
	}
	l.rules.Store(s)
	return nil
}

// Limited reports whether tenant has a budget.
func (l *Limiter) Limited(tenant string) bool {
	r, _ := l.rules.Load().match(tenant)
	return r != nil
}

// Reserve admits a request of tenant that may cost tokens (prompt and
// max_tokens) if its budgets allow, and reserves them and one request. A
// tenant without a budget is always allowed, with no headers. The
// Reservation, not nil when allowed, is settled when the request ends.
// An error is the Store's (the Fallback's, with one): whether to serve
// the request then is the caller's choice.
func (l *Limiter) Reserve(ctx context.Context, tenant string, tokens int64) (*Reservation, Decision, error) {
	tokens = min(max(tokens, 0), MaxCost)
	d := Decision{Allowed: true, Requested: tokens}
	r, key := l.rules.Load().match(tenant)
	if r == nil {
		return &Reservation{}, d, nil
	}
	now := l.now().UnixMicro()
	var reserved int64
	err := l.update(ctx, key, r, func(r *Rule) func(*State) {
		return func(s *State) {
			d = Decision{Allowed: true, Requested: tokens}
			reserved = 0
			tk, rq := s.Tokens, s.Requests
			var waitT, waitR int64
			if r.TokensPerMinute > 0 {
				tk = tk.advance(now, r.TokensPerMinute)
				// More than a whole budget waits for a full bucket.
				reserved = min(tokens, r.TokensPerMinute)
				if !tk.fits(reserved, r.TokensPerMinute) {
					waitT = tk.waitFor(reserved, r.TokensPerMinute)
				}
			}
			if r.RequestsPerMinute > 0 {
				rq = rq.advance(now, r.RequestsPerMinute)
				if !rq.fits(1, r.RequestsPerMinute) {
					waitR = rq.waitFor(1, r.RequestsPerMinute)
				}
			}
			if waitT > 0 || waitR > 0 {
				d.Allowed = false
				d.Exceeded = ExceededTokens
				if waitR > waitT {
					d.Exceeded = ExceededRequests
				}
				d.RetryAfter = time.Duration(max(waitT, waitR)) * time.Microsecond
				reserved = 0
			} else {
				tk = tk.add(reserved)
				if r.RequestsPerMinute > 0 {
					rq = rq.add(1)
				}
			}
			d.Tokens, d.Requests = status(tk, r.TokensPerMinute), status(rq, r.RequestsPerMinute)
			store(s, r, now, tk, rq)
		}
	})
	if err != nil || !d.Allowed {
		return nil, d, err
	}
	return &Reservation{l: l, tenant: tenant, tokens: reserved, requests: 1}, d, nil
}

// adjust charges tokens and requests (refunds, when negative) to tenant's
// buckets under the rules of now.
func (l *Limiter) adjust(ctx context.Context, tenant string, tokens, requests int64) error {
	r, key := l.rules.Load().match(tenant)
	if r == nil || (tokens == 0 && requests == 0) {
		return nil
	}
	now := l.now().UnixMicro()
	return l.update(ctx, key, r, func(r *Rule) func(*State) {
		return func(s *State) {
			tk, rq := s.Tokens, s.Requests
			if r.TokensPerMinute > 0 {
				tk = tk.advance(now, r.TokensPerMinute).add(tokens)
			}
			if r.RequestsPerMinute > 0 {
				rq = rq.advance(now, r.RequestsPerMinute).add(requests)
			}
			store(s, r, now, tk, rq)
		}
	})
}

// update applies op's update under rule r to key's State in the Store,
// or, when the Store fails and there is a Fallback, under r's share in
// the Fallback.
func (l *Limiter) update(ctx context.Context, key string, r *Rule, op func(*Rule) func(*State)) error {
	err := l.store.Update(ctx, key, op(r))
	if err == nil || l.fallback == nil || ctx.Err() != nil {
		return err
	}
	return l.fallback.Update(ctx, key, op(l.share(r)))
}

// share is one replica's part of r, when each keeps its budgets alone.
func (l *Limiter) share(r *Rule) *Rule {
	if l.replicas <= 1 {
		return r
	}
	part := func(limit int64) int64 {
		if limit <= 0 {
			return 0
		}
		return max(limit/l.replicas, 1)
	}
	s := *r
	s.TokensPerMinute, s.RequestsPerMinute = part(r.TokensPerMinute), part(r.RequestsPerMinute)
	return &s
}

// store writes the meters back into s with its expiry.
func store(s *State, r *Rule, now int64, tk, rq Meter) {
	s.Tokens, s.Requests, s.Updated = tk, rq, now
	s.Expires = now
	if r.TokensPerMinute > 0 {
		s.Expires = max(s.Expires, now+tk.reset(r.TokensPerMinute))
	}
	if r.RequestsPerMinute > 0 {
		s.Expires = max(s.Expires, now+rq.reset(r.RequestsPerMinute))
	}
}

func status(m Meter, limit int64) *Status {
	if limit <= 0 {
		return nil
	}
	return &Status{
		Limit:     limit,
		Remaining: m.remaining(limit),
		Used:      m.used(),
		Reset:     time.Duration(m.reset(limit)) * time.Microsecond,
	}
}

// Reservation is what an admitted request holds of its tenant's budgets
// until it ends. Settle or Cancel it once; later calls do nothing.
type Reservation struct {
	l        *Limiter
	tenant   string
	tokens   int64
	requests int64
	done     atomic.Bool
}

// Tokens returns the tokens reserved.
func (r *Reservation) Tokens() int64 {
	if r == nil {
		return 0
	}
	return r.tokens
}

// Settle ends the request: used is the tokens it really cost, prompt and
// generated, what a client that went away received included. The
// difference from the reservation is given back, or charged.
func (r *Reservation) Settle(ctx context.Context, used int64) error {
	if r == nil || r.l == nil || !r.done.CompareAndSwap(false, true) {
		return nil
	}
	used = min(max(used, 0), MaxCost)
	return r.l.adjust(ctx, r.tenant, used-r.tokens, 0)
}

// Cancel ends a request that was not served (it never reached an engine):
// its tokens and its request are given back.
func (r *Reservation) Cancel(ctx context.Context) error {
	if r == nil || r.l == nil || !r.done.CompareAndSwap(false, true) {
		return nil
	}
	return r.l.adjust(ctx, r.tenant, -r.tokens, -r.requests)
}

// Destruct releases nothing: with it a Limiter is a caddy.Destructor,
// kept in a caddy.UsagePool across reloads with its buckets.
func (l *Limiter) Destruct() error { return nil }
