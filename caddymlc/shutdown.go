package caddymlc

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// shuttingDown is set when the mlc app stops because Caddy exits
// (SIGTERM, caddy stop). Caddy stops its apps one after the other, in no
// fixed order: when the mlc app goes first, the http servers still
// accept requests while its fleets drain (the streams in flight get the
// drain grace, then the engines stop). From then on readiness answers
// 503, so that load balancers take the instance out, and new API
// requests a clean 503 with Retry-After instead of a stream the engines'
// stop would cut.
var shuttingDown atomic.Bool

// shutdownRetryAfter is what a client refused during the shutdown is
// told: another replica takes it, or this one once restarted.
const shutdownRetryAfter = 2 * time.Second

// exiting reports that Caddy exits, or that its http app scheduled its
// servers' shutdown (shutdown_delay, {http.shutting_down}): readiness
// then answers 503 at once.
func exiting(req *http.Request) bool {
	if shuttingDown.Load() {
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

// serveShuttingDown answers a readiness probe while Caddy exits.
func serveShuttingDown(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	protocol.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "missing": []string{"the server is shutting down"}})
}

// refuseShuttingDown answers an API request that arrives while Caddy
// exits.
func refuseShuttingDown(w http.ResponseWriter) {
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "the server is shutting down; try again").WithCode("shutting_down")
	e.RetryAfter = shutdownRetryAfter
	e.Write(w)
}
