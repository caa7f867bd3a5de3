// Package plugin is the plugin entry point of caddy-mlc: importing it
// registers every module of this repository (the mlc_router handler, the mlc
// app, the admin API and the mlc-engine and mlc-check subcommands) with
// Caddy.
//
// It exists so that the module's root path is itself a plugin, which is what
// xcaddy expects:
//
//	xcaddy build --with github.com/caddy-mlc/caddy-mlc=<checkout>
//
// puts a blank import of this package in the generated main package and
// points the module at the checkout. The code lives in ./caddymlc (and
// ./caddymlc/mlccheck, the mlc-check command); this package only imports
// it. It is named plugin, not caddymlc, so that it is not mistaken for
// ./caddymlc; its import path is the module's.
package plugin

import (
	// The modules register themselves in their init functions.
	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	_ "github.com/caddy-mlc/caddy-mlc/caddymlc/mlccheck"
)
