package caddymlc

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddyserver/caddy/v2"
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

func serveEngines(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(router.Statuses())
}
