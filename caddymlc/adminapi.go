package caddymlc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddyserver/caddy/v2"
)

// adminAPI serves the mlc endpoints of Caddy's admin API: GET
// /mlc/engines, the state of every engine of every loaded mlc_router; an
// engine's drain (POST /mlc/engines/{addr}/drain and undrain); a model's
// rolling restart (POST /mlc/models/{model}/restart, GET to follow it);
// the API keys (GET /mlc/keys), a new key (POST /mlc/keys) and a key's
// revocation (DELETE /mlc/keys/{name}).
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
		{Pattern: "POST /mlc/models/{model}/restart", Handler: caddy.AdminHandlerFunc(restartModel)},
		{Pattern: "GET /mlc/models/{model}/restart", Handler: caddy.AdminHandlerFunc(serveRestart)},
		{Pattern: "GET /mlc/keys", Handler: caddy.AdminHandlerFunc(serveKeys)},
		{Pattern: "POST /mlc/keys", Handler: caddy.AdminHandlerFunc(createKey)},
		{Pattern: "DELETE /mlc/keys/{name}", Handler: caddy.AdminHandlerFunc(revokeKey)},
	}
}

func serveEngines(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(liveNow().lifecycle.Statuses())
}

// drainEngine takes an engine out of rotation: ?grace= (a Caddy
// duration) is how long the streams on it may finish there before they
// move to other engines; without it, the drain grace of its fleet
// (grace_period, else fleet.DefaultDrainGrace).
func drainEngine(w http.ResponseWriter, r *http.Request) error {
	grace, err := graceOf(r)
	if err != nil {
		return err
	}
	addr := r.PathValue("addr")
	return drainAnswer(w, addr, liveNow().lifecycle.DrainEngine(addr, grace))
}

// graceOf is the request's ?grace= (a Caddy duration), -1 without one:
// the fleet's drain grace.
func graceOf(r *http.Request) (time.Duration, error) {
	g := r.URL.Query().Get("grace")
	if g == "" {
		return -1, nil
	}
	d, err := caddy.ParseDuration(g)
	if err != nil || d < 0 {
		return 0, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("grace %q: want a duration, such as 30s", g)}
	}
	return d, nil
}

// restartModel starts a rolling restart of the model's spawned engines
// (?grace= each one's drain grace) and answers 202 with its plan; GET on
// the same path follows it.
func restartModel(w http.ResponseWriter, r *http.Request) error {
	grace, err := graceOf(r)
	if err != nil {
		return err
	}
	st, err := liveNow().lifecycle.RestartModel(r.PathValue("model"), grace)
	switch {
	case errors.Is(err, fleet.ErrNoModel):
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	case errors.Is(err, fleet.ErrRolling):
		return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
	case err != nil:
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	return json.NewEncoder(w).Encode(st)
}

// serveRestart answers the model's last rolling restart.
func serveRestart(w http.ResponseWriter, r *http.Request) error {
	model := r.PathValue("model")
	st, ok := liveNow().lifecycle.RollOf(model)
	if !ok {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no rolling restart of %s", model)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(st)
}

// undrainEngine puts an engine back in rotation.
func undrainEngine(w http.ResponseWriter, r *http.Request) error {
	addr := r.PathValue("addr")
	return drainAnswer(w, addr, liveNow().lifecycle.UndrainEngine(addr))
}

// drainState is the answer of a drain or an undrain.
type drainState struct {
	Engine string `json:"engine"`
	// Drain is "draining", "drained", or empty: in rotation.
	Drain string `json:"drain"`
}

// drainAnswer answers a drain or an undrain of addr that ended with err.
func drainAnswer(w http.ResponseWriter, addr string, err error) error {
	if errors.Is(err, fleet.ErrNoEngine) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	if err != nil {
		return err
	}
	st, err := liveNow().lifecycle.EngineDrainState(addr)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(drainState{Engine: addr, Drain: st})
}
