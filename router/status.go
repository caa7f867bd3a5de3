package router

import (
	"slices"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// EngineStatus is one engine as operators see it (GET /mlc/engines).
type EngineStatus struct {
	Addr     string `json:"addr"`
	Role     string `json:"role,omitempty"`
	External bool   `json:"external,omitempty"`
	// Dynamic marks an engine a dynamic source found.
	Dynamic bool `json:"dynamic,omitempty"`
	PEStart int  `json:"pe_start"`
	GPUs    int  `json:"gpus"`
	// State is the fleet's: starting, ready, unhealthy, restarting,
	// failed, stopped; "not started" before the mlc app starts it.
	State string `json:"state"`
	// Since is when the engine entered its state, Elapsed how long ago
	// (rounded to the second, as the log's "still starting" lines).
	Since    *time.Time `json:"since,omitempty"`
	Elapsed  string     `json:"elapsed,omitempty"`
	Restarts int        `json:"restarts"`
	PID      int        `json:"pid,omitempty"`
	InFlight int64      `json:"in_flight"`
	// Requests counts the calls the routers made to the engine.
	Requests int64 `json:"requests"`
	// Breaker is the router's circuit breaker: closed, open, half-open.
	Breaker string `json:"breaker"`
	// Draining marks the engines of a fleet no config holds any more
	// (a reload replaced them).
	Draining bool `json:"draining,omitempty"`
	// Drain is an operator's drain of the engine (POST
	// /mlc/engines/{addr}/drain): "draining" (out of rotation, attempts
	// still on it) or "drained" (nothing on it); empty in rotation.
	Drain string `json:"drain,omitempty"`
	// Load is what the engine last reported, when it reports it.
	Load *LoadStatus `json:"load,omitempty"`
	// Scale is the autoscaler's hold on the engine: "scaled down"
	// (stopped, in the pool), "scaling up", "scaling down"; empty when
	// it runs as usual.
	Scale string `json:"scale,omitempty"`
	// Predicted is what its latency model predicts now, for a router
	// that keeps one and while it can say.
	Predicted *PredictedStatus `json:"predicted,omitempty"`
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

// ScaleStatus is a model's autoscaling in GET /mlc/engines.
type ScaleStatus struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// Target is the size the autoscaler brings the model to: the engines
	// running or starting, less one draining to stop.
	Target int         `json:"target"`
	Ready  int         `json:"ready"`
	Last   *ScaleEvent `json:"last,omitempty"`
}

// ScaleEvent is the autoscaler's last change, as operators see it.
type ScaleEvent struct {
	At        time.Time `json:"at"`
	Direction string    `json:"direction"` // up or down
	Reason    string    `json:"reason"`
	Engine    string    `json:"engine"`
	Error     string    `json:"error,omitempty"`
}

// RouterStatus is one router as operators see it (GET /mlc/engines).
type RouterStatus struct {
	Model string `json:"model"`
	Mode  string `json:"mode"`
	// Policy is the selection policy's module name (least_loaded,
	// prefix_aware, ...); PrefixIndex says that
	// the router keeps its engines' prefix indexes for it.
	Policy      string `json:"policy"`
	PrefixIndex bool   `json:"prefix_index,omitempty"`
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
	// Scale is the model's autoscaling (the scale option), if any.
	Scale   *ScaleStatus   `json:"scale,omitempty"`
	Engines []EngineStatus `json:"engines"`
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

// Statuses describes every live router and its engines (the admin
// API's GET /mlc/engines).
func (lv *Live) Statuses() []RouterStatus {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	out := []RouterStatus{}
	for r := range lv.routers {
		out = append(out, r.Status())
	}
	slices.SortStableFunc(out, func(a, b RouterStatus) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// Status describes the router and its engines.
func (r *Router) Status() RouterStatus {
	st := RouterStatus{Model: r.Model, Mode: r.Mode, Policy: r.policyName, PrefixIndex: r.readsPrefixes, Queued: r.queued.Load(),
		Context: r.dec.context, DefaultMaxTokens: r.DefaultMaxTokens, MaxTokensLimit: r.MaxTokensLimit}
	st.Waits = r.waitsStatus()
	qs := r.gate.queue.Stats()
	st.Gate = GateStatus{Batch: r.gate.batch, Capacity: qs.Limits.Requests, InFlight: qs.InFlight, Waiting: qs.Waiting, Tenants: r.gate.queue.Snapshot()}
	lf := r.handle.shown()
	if lf != nil && lf.Scaler() != nil {
		st.Scale = lf.Scaler().Status()
	}
	roles := r.EffectiveRoles()
	starts := engine.DeviceIDStarts(endpointGPUs(r.Endpoints))
	for i, ep := range r.Endpoints {
		es := EngineStatus{Addr: ep.Addr(), Role: roles[i], External: ep.External, GPUs: ep.GPUs,
			PEStart: starts[i], State: "not started", Breaker: breakerClosed.String()}
		if lf != nil {
			u := lf.upstreams[i]
			state, pid := lf.Status(i)
			es.State, es.PID, es.Restarts = state.String(), pid, lf.Restarts(i)
			es.Since, es.Elapsed = sinceOf(lf.Since(i))
			es.InFlight, es.Requests = u.inflight.Load(), u.requests.Load()
			es.Breaker, es.Draining, es.Drain = u.breaker.state(pid).String(), lf.draining(), u.drainStatus()
			es.Load = loadStatusOf(u)
			if s := lf.Scaler(); s != nil {
				es.Scale = s.EngineState(i)
			}
			if r.readsLatency {
				es.Predicted = predictedStatus(u)
			}
		}
		st.Engines = append(st.Engines, es)
	}
	if r.dynamic != nil {
		st.Engines = append(st.Engines, discoveredStatus(r.dynamic)...)
	}
	st.SLO = r.attain.status()
	return st
}

// discoveredStatus describes the discovered engines.
func discoveredStatus(d Discovered) []EngineStatus {
	roles := map[*Upstream][]string{}
	var order []*Upstream
	for _, role := range []string{engine.RolePrefill, engine.RoleDecode, ""} {
		for _, u := range d.Engines(role) {
			if _, ok := roles[u]; !ok {
				order = append(order, u)
				roles[u] = nil
			}
			if role != "" {
				roles[u] = append(roles[u], role)
			}
		}
	}
	out := []EngineStatus{}
	for _, u := range order {
		state, pid := u.fleet.Status(u.index)
		role := engine.RoleAny // found by both sources, or by an any source
		if len(roles[u]) == 1 {
			role = roles[u][0]
		}
		es := EngineStatus{Addr: u.addr, Role: role, External: true, Dynamic: true, PEStart: int(u.pe.Load()), GPUs: 1,
			State: state.String(), PID: pid, InFlight: u.inflight.Load(), Requests: u.requests.Load(), Breaker: u.breaker.state(pid).String(),
			Drain: u.drainStatus()}
		es.Load = loadStatusOf(u)
		es.Since, es.Elapsed = sinceOf(u.fleet.Since(u.index))
		out = append(out, es)
	}
	return out
}

// sinceOf is an engine's Since and Elapsed: nil and "" before its
// first state.
func sinceOf(t time.Time) (*time.Time, string) {
	if t.IsZero() {
		return nil, ""
	}
	return &t, time.Since(t).Round(time.Second).String()
}

// endpointGPUs returns the GPU count of each endpoint.
func endpointGPUs(eps []engine.Endpoint) []int {
	gpus := make([]int, len(eps))
	for i, ep := range eps {
		gpus[i] = ep.GPUs
	}
	return gpus
}

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
