package fleet

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// ModelStatus is one router and its engines as operators see them (GET
// /mlc/engines).
type ModelStatus struct {
	router.RouterStatus
	// Scale is the model's autoscaling (the scale option), if any.
	Scale   *ScaleStatus   `json:"scale,omitempty"`
	Engines []EngineStatus `json:"engines"`
}

// EngineStatus is one engine as operators see it.
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
	router.UpstreamStatus
	// Draining marks the engines of a fleet no config holds any more
	// (a reload replaced them).
	Draining bool `json:"draining,omitempty"`
	// Drain is an operator's drain of the engine (POST
	// /mlc/engines/{addr}/drain): "draining" (out of rotation, attempts
	// still on it) or "drained" (nothing on it); empty in rotation.
	Drain string `json:"drain,omitempty"`
	// Scale is the autoscaler's hold on the engine: "scaled down"
	// (stopped, in the pool), "scaling up", "scaling down"; empty when
	// it runs as usual.
	Scale string `json:"scale,omitempty"`
}

// Statuses describes every live router and its engines, ordered by model.
func (lc *Lifecycle) Statuses() []ModelStatus {
	out := []ModelStatus{}
	for _, r := range lc.routers.Routers() {
		out = append(out, status(r))
	}
	return out
}

// status describes the router and its engines.
func status(r *router.Router) ModelStatus {
	st := ModelStatus{RouterStatus: r.Status()}
	f := Of(r.Shown())
	if f != nil && f.Scaler() != nil {
		st.Scale = f.Scaler().Status()
	}
	roles := r.EffectiveRoles()
	starts := engine.DeviceIDStarts(endpointGPUs(r.Endpoints))
	for i, ep := range r.Endpoints {
		es := EngineStatus{Addr: ep.Addr(), Role: roles[i], External: ep.External, GPUs: ep.GPUs,
			PEStart: starts[i], State: "not started", UpstreamStatus: router.UpstreamStatus{Breaker: "closed"}}
		if f != nil {
			u := f.Upstreams()[i]
			state, pid := f.Status(i)
			es.State, es.PID, es.Restarts = state.String(), pid, f.Restarts(i)
			es.Since, es.Elapsed = sinceOf(f.Since(i))
			es.UpstreamStatus = r.UpstreamStatus(u, pid)
			es.Draining, es.Drain = f.Retired(), drainState(u)
			if s := f.Scaler(); s != nil {
				es.Scale = s.EngineState(i)
			}
		}
		st.Engines = append(st.Engines, es)
	}
	if d := r.Discovered(); d != nil {
		st.Engines = append(st.Engines, discoveredStatus(r, d)...)
	}
	return st
}

// discoveredStatus describes the router's discovered engines.
func discoveredStatus(r *router.Router, d router.Discovered) []EngineStatus {
	roles := map[*router.Upstream][]string{}
	var order []*router.Upstream
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
		procs := u.Pool().Processes()
		state, pid := procs.Status(u.Index())
		role := engine.RoleAny // found by both sources, or by an any source
		if len(roles[u]) == 1 {
			role = roles[u][0]
		}
		es := EngineStatus{Addr: u.Addr(), Role: role, External: true, Dynamic: true, PEStart: u.PEStart(), GPUs: 1,
			State: state.String(), PID: pid, UpstreamStatus: r.UpstreamStatus(u, pid), Drain: drainState(u)}
		if f := Of(u.Pool()); f != nil {
			es.Since, es.Elapsed = sinceOf(f.Since(u.Index()))
		}
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
