package caddymlc

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// ServeHTTP serves the OpenAI-compatible API through the routing cores
// (the model a request names chooses the core) and the readiness path,
// and passes every other request to the next handler.
func (r *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request, next caddyhttp.Handler) error {
	switch {
	case r.HealthURI != "" && req.URL.Path == r.HealthURI && exiting(req):
		serveShuttingDown(w)
	case r.HealthURI != "" && req.URL.Path == r.HealthURI:
		r.front.ServeReadiness(w, req)
	case router.Handles(req.URL.Path) && shuttingDown.Load():
		refuseShuttingDown(w)
	case router.Handles(req.URL.Path) && r.keys != nil:
		if req = r.authenticate(w, req); req != nil {
			r.front.ServeHTTP(w, req)
		}
	case router.Handles(req.URL.Path):
		if f := r.facts(req); f != (router.Facts{}) {
			req = req.WithContext(router.WithFacts(req.Context(), f))
		}
		r.front.ServeHTTP(w, req)
	default:
		return next.ServeHTTP(w, req)
	}
	return nil
}

// Cleanup drops idle engine connections; the mlc app releases the fleets.
func (r *Handler) Cleanup() error {
	if r.stopFailures != nil {
		r.stopFailures()
	}
	for _, s := range r.served {
		s.core.Close()
	}
	r.releaseShared()
	return nil
}
