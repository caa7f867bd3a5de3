package caddymlc

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

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
	PEStart  int    `json:"pe_start"`
	GPUs     int    `json:"gpus"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	PID      int    `json:"pid,omitempty"`
	InFlight int64  `json:"in_flight"`
}

// routerStatus is one mlc_router in GET /mlc/engines.
type routerStatus struct {
	Model   string         `json:"model"`
	Mode    string         `json:"mode"`
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
	st := routerStatus{Model: r.Model, Mode: r.Mode}
	f := r.fleet.get()
	roles := r.effectiveRoles()
	for i, ep := range r.Endpoints {
		es := engineStatus{Addr: ep.Addr(), Role: roles[i], External: ep.External, GPUs: ep.GPUs,
			PEStart: r.bal.backends[i].peStart, InFlight: r.bal.backends[i].inflight.Load(), State: "not started"}
		if f != nil {
			es.State, es.Restarts, es.PID = f.State(i).String(), f.Restarts(i), f.PID(i)
		}
		st.Engines = append(st.Engines, es)
	}
	return st
}

// effectiveRoles names what each engine is used for in this mode.
func (r *Router) effectiveRoles() []string {
	roles := make([]string, len(r.Endpoints))
	for i := range roles {
		roles[i] = "any"
	}
	if r.Mode != ModeDisagg {
		return roles
	}
	prefill, decode, _ := splitRoles(r.Endpoints)
	for i := range roles {
		roles[i] = ""
	}
	for _, i := range prefill {
		roles[i] = "prefill"
	}
	for _, i := range decode {
		if roles[i] != "" {
			roles[i] += "+"
		}
		roles[i] += "decode"
	}
	return roles
}
