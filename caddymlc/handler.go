package caddymlc

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// router is the provisioned state of a Router.
type router struct{}

// Provision applies defaults.
func (r *Router) Provision(ctx caddy.Context) error {
	*r = r.withDefaults()
	return nil
}

// Cleanup releases the router's engines.
func (r *Router) Cleanup() error { return nil }

// ServeHTTP passes every request to the next handler until the router is
// wired in.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, req)
}
