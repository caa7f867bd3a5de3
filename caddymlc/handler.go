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
	case router.Handles(req.URL.Path):
		h.serveAPI(w, req)
	default:
		return next.ServeHTTP(w, req)
	}
	return nil
}

// serveAPI serves a request of the API, checking its key with keys; when
// Caddy's access log would show the credential it came with, the
// handler writes the line instead.
func (h *Handler) serveAPI(w http.ResponseWriter, req *http.Request) {
	if line := h.access.take(w, req); line != nil {
		defer line.write()
		w, req = line.w, line.req
	}
	switch {
	case h.shuttingDown():
		router.ShuttingDownError().Write(w)
	case h.keys != nil:
		if req = h.authenticate(w, req); req != nil {
			h.front.ServeHTTP(w, req)
		}
	default:
		if f := h.facts(req); f != (router.Facts{}) {
			req = req.WithContext(router.WithFacts(req.Context(), f))
		}
		h.front.ServeHTTP(w, req)
	}
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
