package caddymlc

import (
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
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
