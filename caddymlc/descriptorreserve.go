package caddymlc

import (
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/fdreserve"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// DescriptorReserve is a listener wrapper that makes running out of file
// descriptors loud and fast for the clients Caddy cannot accept. Without
// it such a client waits in the kernel's accept queue, unanswered, while
// Go's server retries the accept with a backoff of up to a second.
//
// Each wrapped listener adds a spare descriptor (an open /dev/null) to a
// reserve the process's wrapped listeners share. When an accept fails
// with EMFILE or ENFILE, the listener lets a spare go and accepts one
// client with it. A client is served when the reserve can be made whole
// again after it was accepted (the process has a descriptor free beyond
// the reserve); otherwise it is answered a 503 (OpenAI's error shape,
// code no_descriptors, Retry-After, Connection: close) and closed, and
// the spare is taken back. Service returns on its own as connections
// close. Each refused client is counted in
// caddy_mlc_clients_dropped_total{reason="not_accepted"}, an Error line
// says why at most once a second per listener, with how many were refused
// since the last line, and a Warn line says when clients are accepted
// again.
//
// Place it after the tls wrapper (the default when `tls` is not listed:
// Caddy puts every wrapper after TLS): it then completes the TLS
// handshake itself and answers over HTTP/1.1 or HTTP/2, as the client
// negotiated. Before tls it sees raw bytes: it answers plain HTTP, and
// closes a connection that starts a TLS handshake at once (it has no
// certificate to answer it with), which the client sees as a reset
// rather than a wait. In a Caddyfile:
//
//	{
//		servers {
//			listener_wrappers {
//				mlc_descriptor_reserve [{
//					timeout <duration>
//				}]
//			}
//		}
//	}
type DescriptorReserve struct {
	// Timeout bounds the answer to one refused client: its TLS handshake,
	// its request's head, the 503. The accept loop waits for it, and
	// nobody could be accepted meanwhile anyway. Default: 1s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	log     *zap.Logger
	reserve *fdreserve.Reserve
}

// CaddyModule returns the Caddy module information.
func (DescriptorReserve) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.listeners.mlc_descriptor_reserve",
		New: func() caddy.Module { return new(DescriptorReserve) },
	}
}

// Provision sets the logger, takes a hold on the process's reserve and
// registers the metric.
func (d *DescriptorReserve) Provision(ctx caddy.Context) error {
	d.log = ctx.Logger()
	val, _, _ := descriptorReserves.LoadOrNew(reserveKey, func() (caddy.Destructor, error) {
		return pooledReserve{fdreserve.NewReserve()}, nil
	})
	d.reserve = val.(pooledReserve).Reserve
	return registerMetrics(ctx.GetMetricsRegistry())
}

// Cleanup lets go of the hold on the reserve.
func (d *DescriptorReserve) Cleanup() error {
	_, err := descriptorReserves.Delete(reserveKey)
	return err
}

// UnmarshalCaddyfile reads `mlc_descriptor_reserve [{ timeout <duration> }]`.
func (d *DescriptorReserve) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	disp.Next() // the wrapper's name
	if disp.NextArg() {
		return disp.ArgErr()
	}
	for disp.NextBlock(0) {
		switch disp.Val() {
		case "timeout":
			if err := durationArg(disp, "timeout", &d.Timeout); err != nil {
				return err
			}
		default:
			return disp.Errf("unknown option %q", disp.Val())
		}
	}
	return nil
}

// WrapListener wraps ln and adds its spare to the process's reserve.
func (d *DescriptorReserve) WrapListener(ln net.Listener) net.Listener {
	return d.reserve.Wrap(ln, fdreserve.Refusal{Answer: router.NoDescriptorsError, Count: router.DropNotAccepted,
		Timeout: time.Duration(d.Timeout), Log: d.log})
}

// descriptorReserves holds the process's reserve, which every wrapped
// listener shares, across reloads: the new config's listeners share it
// with the old one's until these close.
var descriptorReserves = caddy.NewUsagePool()

const reserveKey = "mlc-descriptor-reserve"

// pooledReserve is the reserve in its pool: its spares close with the
// listeners that hold them, so it has nothing of its own to release.
type pooledReserve struct{ *fdreserve.Reserve }

func (pooledReserve) Destruct() error { return nil }

// Interface guards.
var (
	_ caddy.Provisioner     = (*DescriptorReserve)(nil)
	_ caddy.CleanerUpper    = (*DescriptorReserve)(nil)
	_ caddy.ListenerWrapper = (*DescriptorReserve)(nil)
	_ caddyfile.Unmarshaler = (*DescriptorReserve)(nil)
)
