package caddymlc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddyserver/caddy/v2"
)

// adminAPI serves the mlc endpoints of Caddy's admin API: GET
// /mlc/engines, the state of every engine of every loaded mlc_router, and
// an engine's drain (POST /mlc/engines/{addr}/drain and undrain).
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.mlc", New: func() caddy.Module { return new(adminAPI) }}
}

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/mlc/engines", Handler: caddy.AdminHandlerFunc(serveEngines)},
		{Pattern: "POST /mlc/engines/{addr}/drain", Handler: caddy.AdminHandlerFunc(drainEngine)},
		{Pattern: "POST /mlc/engines/{addr}/undrain", Handler: caddy.AdminHandlerFunc(undrainEngine)},
	}
}

func serveEngines(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(router.Statuses())
}

// drainEngine takes an engine out of rotation: ?grace= (a Caddy
// duration) is how long the streams on it may finish there before they
// move to other engines; without it, the drain grace of its fleet
// (grace_period, else router.DefaultDrainGrace).
func drainEngine(w http.ResponseWriter, r *http.Request) error {
	grace := time.Duration(-1)
	if g := r.URL.Query().Get("grace"); g != "" {
		d, err := caddy.ParseDuration(g)
		if err != nil || d < 0 {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("grace %q: want a duration, such as 30s", g)}
		}
		grace = d
	}
	addr := r.PathValue("addr")
	return drainAnswer(w, addr, router.DrainEngine(addr, grace))
}

// undrainEngine puts an engine back in rotation.
func undrainEngine(w http.ResponseWriter, r *http.Request) error {
	addr := r.PathValue("addr")
	return drainAnswer(w, addr, router.UndrainEngine(addr))
}

// drainState is the answer of a drain or an undrain.
type drainState struct {
	Engine string `json:"engine"`
	// Drain is "draining", "drained", or empty: in rotation.
	Drain string `json:"drain"`
}

// drainAnswer answers a drain or an undrain of addr that ended with err.
func drainAnswer(w http.ResponseWriter, addr string, err error) error {
	if errors.Is(err, router.ErrNoEngine) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	if err != nil {
		return err
	}
	st, err := router.EngineDrainState(addr)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(drainState{Engine: addr, Drain: st})
}
