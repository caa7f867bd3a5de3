package caddymlc

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

// The mlc app marks the process shutting down when it stops because
// Caddy exits (SIGTERM, caddy stop). Caddy stops its apps one after the
// other, in no fixed order: when the mlc app goes first, the http servers
// still accept requests while its fleets drain (the streams in flight get
// the drain grace, then the engines stop). From then on readiness answers
// 503, so that load balancers take the instance out, and new API requests
// a clean 503 with Retry-After instead of a stream the engines' stop
// would cut.

// shuttingDown reports that the mlc app stopped because Caddy exits.
func (h *Handler) shuttingDown() bool { return h.proc != nil && h.proc.shuttingDown.Load() }

// exiting reports that Caddy exits, or that its http app scheduled its
// servers' shutdown (shutdown_delay, {http.shutting_down}): readiness
// then answers 503 at once.
func (h *Handler) exiting(req *http.Request) bool {
	if h.shuttingDown() {
		return true
	}
	repl, _ := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return false
	}
	v, _ := repl.Get("http.shutting_down")
	b, _ := v.(bool)
	return b
}
