package router

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Defaults of the wait for an engine.
const (
	// DefaultQueueTimeout is how long a request waits for an engine when
	// none is ready: enough for a crashed built-in engine to restart
	// (backoff starts at 200 ms) and for the moment between old and new
	// engines in a reload; a real model that loads its weights for
	// minutes outlasts it, and its clients get a 503 with Retry-After
	// rather than a hang.
	DefaultQueueTimeout = 30 * time.Second
	// DefaultQueueSize bounds the requests waiting at once per router;
	// more get a 503 at once.
	DefaultQueueSize = 1024
	// retryAfter is what a 503 tells the client.
	retryAfter = 2 * time.Second
)

// noEngineError is returned when no engine of a needed role became ready
// within the queue timeout, when the queue is full, or when the engines
// failed to start.
type noEngineError struct {
	role   string
	waited time.Duration
	full   bool
	cause  error // the engines' start failure
}

func (e *noEngineError) Error() string {
	switch {
	case e.cause != nil:
		return fmt.Sprintf("no %s engine: %v", e.role, e.cause)
	case e.full:
		return fmt.Sprintf("no %s engine is ready and the queue of waiting requests is full", e.role)
	}
	return fmt.Sprintf("no %s engine became ready in %v", e.role, e.waited.Round(time.Millisecond))
}

// apiError is the answer to a client whose request found no engine.
func (e *noEngineError) apiError() *protocol.Error {
	err := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "%s; try again shortly", e).WithCode("engine_unavailable")
	err.RetryAfter = retryAfter
	return err
}

// acquire holds an engine of role for a call. While none is ready it
// waits, in a queue bounded by queue_size, for up to queue_timeout: an
// engine restarting, the engines of a config starting (whichever of
// Caddy's apps starts first), the moment between old and new engines in a
// reload, dynamic engines not found yet. It returns errDraining when the
// router was replaced by a reload: the attempt goes to its successor.
func (r *Router) acquire(ctx context.Context, role string, o pickOptions) (*lease, error) {
	if r.handedOver() {
		return nil, errDraining
	}
	if l := r.pick(role, o); l != nil {
		return l, nil
	}
	if r.queued.Add(1) > int64(r.QueueSize) {
		r.queued.Add(-1)
		return nil, &noEngineError{role: role, full: true}
	}
	r.metrics.queued.Inc()
	begin := time.Now()
	defer func() {
		r.queued.Add(-1)
		r.metrics.queued.Dec()
		r.metrics.queueWait.Observe(time.Since(begin).Seconds())
		engineWaitOf(ctx).since(begin)
	}()
	timeout := time.NewTimer(time.Duration(r.QueueTimeout))
	defer timeout.Stop()
	for {
		changed := engineChanges.wait()
		if r.handedOver() {
			return nil, errDraining
		}
		if lf := r.handle.get(); lf != nil {
			if err := lf.failed(); err != nil && r.dynamic == nil {
				return nil, &noEngineError{role: role, cause: err}
			}
		}
		if l := r.pick(role, o); l != nil {
			return l, nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			return nil, &noEngineError{role: role, waited: time.Since(begin)}
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// handedOver reports that a reload replaced r by a newer router, which
// takes its new work.
func (r *Router) handedOver() bool {
	return r.retired.Load() && r.next.Load() != nil
}
