package router

import (
	"cmp"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// UpstreamStatus is what the routers know of an engine, as operators
// see it (a part of GET /mlc/engines, which package fleet writes).
type UpstreamStatus struct {
	InFlight int64 `json:"in_flight"`
	// Requests counts the calls the routers made to the engine.
	Requests int64 `json:"requests"`
	// Breaker is the router's circuit breaker: closed, open, half-open.
	Breaker string `json:"breaker"`
	// Load is what the engine last reported, when it reports it.
	Load *LoadStatus `json:"load,omitempty"`
	// Predicted is what its latency model predicts now, for a router
	// that keeps one and while it can say.
	Predicted *PredictedStatus `json:"predicted,omitempty"`
	// Cache is what the routers expected its prefix cache to hold and
	// what it reused (cacheaccount.go), from the first route it reported
	// on.
	Cache *CacheStatus `json:"cache,omitempty"`
}

// UpstreamStatus describes u, whose process is pid, as the router sees
// it.
func (r *Router) UpstreamStatus(u *Upstream, pid int) UpstreamStatus {
	st := UpstreamStatus{InFlight: u.inflight.Load(), Requests: u.requests.Load(), Breaker: u.breaker.state(pid).String(), Load: loadStatusOf(u),
		Cache: u.cacheCounts.status()}
	if r.readsLatency {
		st.Predicted = predictedStatus(u)
	}
	return st
}

// loadStatusOf returns u's last load report, or nil before the first.
func loadStatusOf(u *Upstream) *LoadStatus {
	l := u.load.Load()
	if l == nil {
		return nil
	}
	return &LoadStatus{Running: l.Running, Waiting: l.Waiting, Blocked: l.Blocked, Prepared: l.Prepared,
		KVPagesFree: l.PagesFree, KVPages: l.PagesTotal, At: l.at}
}

// LoadStatus is an engine's own report of its load.
type LoadStatus struct {
	Running     int       `json:"running"`
	Waiting     int       `json:"waiting"`
	Blocked     int       `json:"blocked"` // of waiting, what the engine could not start (all of it, if it does not say)
	Prepared    int       `json:"prepared"`
	KVPagesFree int       `json:"kv_pages_free"`
	KVPages     int       `json:"kv_pages_total"`
	At          time.Time `json:"at"`
}

// RouterStatus is what a router knows of itself, as operators see it
// (a part of GET /mlc/engines, which package fleet writes).
type RouterStatus struct {
	Model string `json:"model"`
	Mode  string `json:"mode"`
	// Policy is the selection policy's module name (least_loaded,
	// prefix_aware, ...); PrefixIndex says that
	// the router keeps its engines' prefix indexes for it.
	Policy      string `json:"policy"`
	PrefixIndex bool   `json:"prefix_index,omitempty"`
	// PrefixCache is the engines' prefix cache mode (radix, the
	// default, or disable); Sessions says that the router routes a
	// session's turns to the engine of its last (session.go).
	PrefixCache string `json:"prefix_cache"`
	Sessions    bool   `json:"sessions,omitempty"`
	// Context is a sequence's tokens (0: unknown); DefaultMaxTokens and
	// MaxTokensLimit the output bounds (0: none but the context).
	Context          int `json:"context,omitempty"`
	DefaultMaxTokens int `json:"default_max_tokens,omitempty"`
	MaxTokensLimit   int `json:"max_tokens_limit,omitempty"`
	// Waits are the bounds on a request's waits (prefill.go).
	Waits WaitsStatus `json:"waits"`
	// Queued are requests waiting for an engine to be ready at all.
	Queued int64 `json:"queued"`
	// Gate is the router's fair queue: requests waiting for the engines'
	// capacity, per tenant and band.
	Gate GateStatus `json:"gate"`
	// SLO is the attainment of the requests with latency targets; absent
	// before the first.
	SLO *SLOStatus `json:"slo,omitempty"`
}

// GateStatus is the router's fair queue as operators see it.
type GateStatus struct {
	// Batch is each generating engine's bound (0: none known, the gate
	// holds nothing back); Capacity the requests the engines may run now
	// (-1: no bound).
	Batch    int `json:"batch"`
	Capacity int `json:"capacity"`
	InFlight int `json:"in_flight"`
	Waiting  int `json:"waiting"`
	// Tenants are the tenants with requests waiting or in flight, by band.
	Tenants []fair.TenantState `json:"tenants"`
}

// Status describes the router.
func (r *Router) Status() RouterStatus {
	st := RouterStatus{Model: r.Model, Mode: r.Mode, Policy: r.policyName, PrefixIndex: r.readsPrefixes, Queued: r.queued.Load(),
		PrefixCache: cmp.Or(r.PrefixCache, engine.PrefixCacheRadix), Sessions: r.sessionsActive(),
		Context: r.dec.context, DefaultMaxTokens: r.DefaultMaxTokens, MaxTokensLimit: r.MaxTokensLimit}
	st.Waits = r.waitsStatus()
	qs := r.gate.queue.Stats()
	st.Gate = GateStatus{Batch: r.gate.batch, Capacity: qs.Limits.Requests, InFlight: qs.InFlight, Waiting: qs.Waiting, Tenants: r.gate.queue.Snapshot()}
	st.SLO = r.attain.status()
	return st
}

// Discovered is the router's source of discovered engines, nil for none.
func (r *Router) Discovered() Discovered { return r.dynamic }

// PEStart is the engine's first NVSHMEM PE; -1 while unknown.
func (u *Upstream) PEStart() int { return int(u.pe.Load()) }

// EffectiveRoles names what each listed engine is used for in this mode.
func (r *Router) EffectiveRoles() []string {
	prefill, decode := map[int]bool{}, map[int]bool{}
	for _, i := range r.roles[engine.RolePrefill] {
		prefill[i] = true
	}
	for _, i := range r.roles[engine.RoleDecode] {
		decode[i] = true
	}
	roles := make([]string, len(r.Endpoints))
	for i := range roles {
		switch {
		case prefill[i] && !decode[i]:
			roles[i] = engine.RolePrefill
		case decode[i] && !prefill[i]:
			roles[i] = engine.RoleDecode
		default:
			roles[i] = engine.RoleAny
		}
	}
	return roles
}
