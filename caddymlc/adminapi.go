package caddymlc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// adminAPI serves GET /mlc/engines on Caddy's admin endpoint: the state of
// every engine of every loaded mlc_router, for operators.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.mlc", New: func() caddy.Module { return new(adminAPI) }}
}

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/mlc/engines", Handler: caddy.AdminHandlerFunc(serveEngines)}}
}

// engineStatus is one engine in GET /mlc/engines.
type engineStatus struct {
	Addr     string `json:"addr"`
	Role     string `json:"role,omitempty"`
	External bool   `json:"external,omitempty"`
	// Dynamic marks an engine a dynamic source found.
	Dynamic bool `json:"dynamic,omitempty"`
	PEStart int  `json:"pe_start"`
	GPUs    int  `json:"gpus"`
	// State is the fleet's: starting, ready, unhealthy, restarting,
	// failed, stopped; "not started" before the mlc app started it.
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	PID      int    `json:"pid,omitempty"`
	InFlight int64  `json:"in_flight"`
	// Requests counts the calls the routers made to the engine.
	Requests int64 `json:"requests"`
	// Breaker is the router's circuit breaker: closed, open, half-open.
	Breaker  string `json:"breaker"`
	Draining bool   `json:"draining,omitempty"`
	// Load is what the engine last reported, when it reports it.
	Load *loadStatus `json:"load,omitempty"`
}

// loadStatusOf returns u's last load report, or nil before the first.
func loadStatusOf(u *upstream) *loadStatus {
	l := u.load.Load()
	if l == nil {
		return nil
	}
	return &loadStatus{Running: l.running, Waiting: l.waiting, Blocked: l.blocked, Prepared: l.prepared,
		KVPagesFree: l.pagesFree, KVPages: l.pagesTotal, At: l.at}
}

// loadStatus is an engine's own report of its load.
type loadStatus struct {
	Running     int       `json:"running"`
	Waiting     int       `json:"waiting"`
	Blocked     int       `json:"blocked"` // of waiting, what the engine could not start (all of it, if it does not say)
	Prepared    int       `json:"prepared"`
	KVPagesFree int       `json:"kv_pages_free"`
	KVPages     int       `json:"kv_pages_total"`
	At          time.Time `json:"at"`
}

// routerStatus is one mlc_router in GET /mlc/engines.
type routerStatus struct {
	Model   string         `json:"model"`
	Mode    string         `json:"mode"`
	Queued  int64          `json:"queued"`
	Engines []engineStatus `json:"engines"`
}

func serveEngines(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(statusOfLive())
}

func statusOfLive() []routerStatus {
	live.Lock()
	defer live.Unlock()
	out := []routerStatus{}
	for r := range live.routers {
		out = append(out, r.status())
	}
	return out
}

func (r *Router) status() routerStatus {
	st := routerStatus{Model: r.Model, Mode: r.Mode, Queued: r.queued.Load()}
	lf := r.handle.get()
	roles := r.effectiveRoles()
	starts := engine.DeviceIDStarts(endpointGPUs(r.Endpoints))
	for i, ep := range r.Endpoints {
		es := engineStatus{Addr: ep.Addr(), Role: roles[i], External: ep.External, GPUs: ep.GPUs,
			PEStart: starts[i], State: "not started", Breaker: breakerClosed.String()}
		if lf != nil {
			u := lf.upstreams[i]
			state, pid := lf.Status(i)
			es.State, es.PID, es.Restarts = state.String(), pid, lf.Restarts(i)
			es.InFlight, es.Requests = u.inflight.Load(), u.requests.Load()
			es.Breaker, es.Draining = u.breaker.state(pid).String(), lf.draining.Load()
			es.Load = loadStatusOf(u)
		}
		st.Engines = append(st.Engines, es)
	}
	if r.dynamic != nil {
		st.Engines = append(st.Engines, r.dynamic.status()...)
	}
	return st
}

// status describes the discovered engines.
func (d *dynamicSet) status() []engineStatus {
	roles := map[*upstream][]string{}
	var order []*upstream
	for _, role := range []string{engine.RolePrefill, engine.RoleDecode, ""} {
		for _, u := range d.list(role) {
			if _, ok := roles[u]; !ok {
				order = append(order, u)
				roles[u] = nil
			}
			if role != "" {
				roles[u] = append(roles[u], role)
			}
		}
	}
	out := []engineStatus{}
	for _, u := range order {
		state, pid := u.fleet.Status(u.index)
		role := strings.Join(roles[u], "+")
		if role == "" {
			role = engine.RoleAny
		}
		es := engineStatus{Addr: u.addr, Role: role, External: true, Dynamic: true, PEStart: int(u.pe.Load()), GPUs: 1,
			State: state.String(), PID: pid, InFlight: u.inflight.Load(), Requests: u.requests.Load(), Breaker: u.breaker.state(pid).String()}
		es.Load = loadStatusOf(u)
		out = append(out, es)
	}
	return out
}

// endpointGPUs returns the GPU count of each endpoint.
func endpointGPUs(eps []engine.Endpoint) []int {
	gpus := make([]int, len(eps))
	for i, ep := range eps {
		gpus[i] = ep.GPUs
	}
	return gpus
}

// effectiveRoles names what each engine is used for in this mode.
func (r *Router) effectiveRoles() []string {
	roles := make([]string, len(r.Endpoints))
	for i := range roles {
		roles[i] = engine.RoleAny
	}
	if r.Mode != ModeDisagg {
		return roles
	}
	prefill, decode, _ := splitRoles(r.Endpoints)
	for i := range roles {
		roles[i] = ""
	}
	for _, i := range prefill {
		roles[i] = engine.RolePrefill
	}
	for _, i := range decode {
		if roles[i] != "" {
			roles[i] += "+"
		}
		roles[i] += engine.RoleDecode
	}
	return roles
}
