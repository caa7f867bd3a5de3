// Command caddy is Caddy with the mlc_router module and the p2c selection
// policy (examples/p2c.Caddyfile):
//
//	go build -o caddy-p2c ./examples/p2c/caddy && ./caddy-p2c run --config examples/p2c.Caddyfile
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	_ "github.com/caddy-mlc/caddy-mlc/examples/p2c"
)

func main() { caddycmd.Main() }
