package caddymlc

import (
	_ "embed"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

// fleetPage serves the fleet page on Caddy's admin endpoint: GET /mlc/,
// one self-contained HTML page (its CSS and script inline, nothing
// fetched from elsewhere) that shows every model's engines, gate and
// recent errors from GET /mlc/engines and /metrics, and drains, undrains
// and restarts through the admin API (adminapi.go). A browser's address
// bar sends no Origin: the admin endpoint's origins must list "" for it
// (docs/operations.md, "The fleet page").
type fleetPage struct{}

// fleetPageHTML is the page, caddymlc/fleetpage/index.html.
//
//go:embed fleetpage/index.html
var fleetPageHTML string

// fleetPagePolicy keeps the page to itself: inline script and style, the
// admin endpoint its only connection, no frame around it (its buttons
// drain engines).
const fleetPagePolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; " +
	"img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// CaddyModule returns the Caddy module information.
func (fleetPage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.mlc_fleet_page", New: func() caddy.Module { return new(fleetPage) }}
}

// Routes returns the page's admin route: /mlc/ exactly.
func (fleetPage) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "GET /mlc/{$}", Handler: caddy.AdminHandlerFunc(serveFleetPage)}}
}

func serveFleetPage(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", fleetPagePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := io.WriteString(w, fleetPageHTML)
	return err
}
