// Package caddymlc is the mlc_router Caddy module: an OpenAI-compatible
// API in front of a fleet of MLC-LLM engines, which the mlc app starts
// with the config. Each completion request becomes MLC's microserving
// calls (prefill on one engine, KV sent to a decode engine, decode
// streamed back), with transparent recovery when an engine preempts,
// fails or falls silent.
package caddymlc

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// init registers everything the module adds to Caddy: the handler and its
// Caddyfile directive, the mlc global option (the mlc app's config), its selection policies, the mlc app that runs the
// engines, the admin route /mlc/engines, the listener wrapper that answers
// clients Caddy has no descriptor for, and the mlc-engine command that
// runs a built-in engine.
func init() {
	caddy.RegisterModule(Handler{})
	caddy.RegisterModule(LeastLoadedSelection{})
	caddy.RegisterModule(PrefixAwareSelection{})
	caddy.RegisterModule(RoundRobinSelection{})
	caddy.RegisterModule(SLOAwareSelection{})
	caddy.RegisterModule(new(App))
	caddy.RegisterModule(adminAPI{})
	caddy.RegisterModule(fleetPage{})
	caddy.RegisterModule(DescriptorReserve{})
	httpcaddyfile.RegisterHandlerDirective("mlc_router", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mlc_router", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterGlobalOption("mlc", parseGlobalOption)
	caddycmd.RegisterCommand(engineCommand)
	caddycmd.RegisterCommand(keyCommand)
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mlc_router",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
	_ caddy.AdminRouter           = adminAPI{}
)
