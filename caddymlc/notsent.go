package caddymlc

import (
	"context"
	"net"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mlc/caddy-mlc/internal/notsent"
)

// unsentLimit bounds the bytes of an answer the kernel holds not yet sent
// (TCP_NOTSENT_LOWAT). Without it a socket's send buffer grows to
// megabytes, a client that stopped reading would take a whole long
// generation into it, and no write would ever wait for the client_timeout
// to catch: the engines would generate every token for nobody.
const unsentLimit = 16 << 10

// limitUnsentOnAccept makes the server of the router's routes bound what
// the kernel buffers unsent for each connection it accepts (once per
// connection, not per request). Caddy gives handlers no other way to the
// connection. Each router of a server registers (setting the option twice
// is harmless, and a map of servers would outlive the configs). The bound
// applies to the server's other routes too: it costs a bulk transfer
// nothing (the kernel refills the queue as it drains) and keeps their
// slow readers from holding megabytes.
func limitUnsentOnAccept(ctx caddy.Context) {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return
	}
	srv.RegisterConnContext(func(ctx context.Context, c net.Conn) context.Context {
		notsent.Limit(c, unsentLimit)
		return ctx
	})
}
