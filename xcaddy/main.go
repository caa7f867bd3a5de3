// Command xcaddy is a Caddy binary with the standard modules and the
// mlc_router module: `go build -o caddy ./xcaddy`, then `./caddy run`.
// (Build it rather than `go run` it when it runs in the background: go run
// passes no SIGINT on, and a SIGTERM to it leaves Caddy and its engines
// running.)
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// The standard Caddy modules.
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// Every module of this repository, as xcaddy's --with adds it.
	_ "github.com/caddy-mlc/caddy-mlc"
)

func main() {
	caddycmd.Main()
}
