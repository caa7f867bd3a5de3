// Command xcaddy is a Caddy binary with the standard modules and the
// mlc_router module, for `go run ./xcaddy <caddy args>`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// The standard Caddy modules.
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The mlc_router module and the mlc-engine subcommand.
	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
)

func main() {
	caddycmd.Main()
}
