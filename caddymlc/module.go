// Package caddymlc is the mlc_router Caddy module: it starts a fleet of
// MLC-LLM engines at provision time and serves an OpenAI-compatible API in
// front of them, turning each completion request into MLC's microserving
// calls (prefill on one engine, KV sent to a decode engine, decode streamed
// back), with transparent recovery when an engine preempts a request.
package caddymlc

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Router{})
	httpcaddyfile.RegisterHandlerDirective("mlc_router", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mlc_router", httpcaddyfile.Before, "reverse_proxy")
}

// CaddyModule returns the Caddy module information.
func (Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mlc_router",
		New: func() caddy.Module { return new(Router) },
	}
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Router)(nil)
	_ caddy.Validator             = (*Router)(nil)
	_ caddy.CleanerUpper          = (*Router)(nil)
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
)
