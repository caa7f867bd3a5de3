package router

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A call that cannot open a connection for want of file descriptors is a
// fast 503 with Retry-After for the client, counted, and no failure of
// the engine (its breaker would take a healthy engine out of rotation).
func TestOutOfDescriptorsIsAFast503(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE} {
		u := &Upstream{pool: &Pool{live: NewLive()}, addr: "127.0.0.1:1"}
		p := &proc{Upstream: u, pid: 7}
		c := newEngineClient(time.Second, zap.NewNop(), new(descriptorLog))
		cl := &call{t: p, op: "v1/completions"}
		cl.ctx, cl.cancel = context.WithCancelCause(context.Background())
		before := testutil.ToFloat64(sharedMetrics().dropped.WithLabelValues(dropNoDescriptors))
		dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", errno)}
		err := c.failure(cl, dialErr)
		p.judge(err) // what the call's owner does with it
		var apiErr *protocol.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.RetryAfter == 0 {
			t.Fatalf("%v: %#v, want a 503 with Retry-After", errno, err)
		}
		if retryCause(err) != "" {
			t.Errorf("%v: retried on another engine", errno)
		}
		if f, _ := u.breaker.badness(); f != 0 {
			t.Errorf("%v: the engine was blamed (%d failures)", errno, f)
		}
		if d := testutil.ToFloat64(sharedMetrics().dropped.WithLabelValues(dropNoDescriptors)) - before; d != 1 {
			t.Errorf("%v: clients_dropped_total{reason=no_descriptors} grew by %v", errno, d)
		}
		cl.cancel(nil)
	}
}
