package caddymlc

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// ServeHTTP serves the OpenAI-compatible API through the routing cores
// (the model a request names chooses the core) and the readiness path,
// and passes every other request to the next handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request, next caddyhttp.Handler) error {
	switch {
	case h.HealthURI != "" && req.URL.Path == h.HealthURI && h.exiting(req):
		router.ServeShuttingDown(w)
	case h.HealthURI != "" && req.URL.Path == h.HealthURI:
		h.front.ServeReadiness(w, req)
	case router.Handles(req.URL.Path) && h.shuttingDown():
		router.ShuttingDownError().Write(w)
	case router.Handles(req.URL.Path) && h.keys != nil:
		if req = h.authenticate(w, req); req != nil {
			h.front.ServeHTTP(w, req)
		}
	case router.Handles(req.URL.Path):
		if f := h.facts(req); f != (router.Facts{}) {
			req = req.WithContext(router.WithFacts(req.Context(), f))
		}
		h.front.ServeHTTP(w, req)
	default:
		return next.ServeHTTP(w, req)
	}
	return nil
}

// Cleanup drops idle engine connections; the mlc app releases the fleets.
func (h *Handler) Cleanup() error {
	if h.stopFailures != nil {
		h.stopFailures()
	}
	for _, s := range h.served {
		s.core.Close()
	}
	h.MCP.close()
	h.releaseShared()
	return nil
}
