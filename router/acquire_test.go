package router

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// queueRouter is a router with no fleet yet, as when Caddy starts the
// http app before the mlc app.
func queueRouter(timeout time.Duration, size int) *Router {
	return &Router{live: NewLive(), routerState: new(routerState), handle: &Handle{}, metrics: sharedMetrics(),
		policy: LeastLoaded{}, roles: map[string][]int{}, Config: Config{QueueTimeout: timeout, QueueSize: size}}
}

// A request that arrives before the engines run waits, and is served as
// soon as they are attached and ready.
func TestQueueWaitsForTheFleet(t *testing.T) {
	r := queueRouter(time.Minute, 8)
	got := make(chan *lease, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := r.acquire(context.Background(), "", pickOptions{})
		got <- l
		errc <- err
	}()
	// Attach only once the request is queued: the wait, not luck, serves it.
	waitQueued(t, r, 1)
	lf := externalFleet(t, 1)
	r.roles = RoleIndexes(ModeWhole, lf.spec.Endpoints)
	r.handle.pool.Store(lf.Pool)
	r.live.changes.notify()
	if l, err := <-got, <-errc; err != nil || l == nil || l.Upstream != lf.upstreams[0] {
		t.Fatalf("acquire after attach: %v %v", l, err)
	} else {
		l.release(nil)
	}
	if n := r.queued.Load(); n != 0 {
		t.Fatalf("%d still queued", n)
	}
}

// When no engine comes within queue_timeout the client gets a 503 with
// Retry-After; a full queue answers at once.
func TestQueueTimesOutAndOverflows(t *testing.T) {
	r := queueRouter(50*time.Millisecond, 1)
	_, err := r.acquire(context.Background(), engine.RoleDecode, pickOptions{})
	var none *noEngineError
	if !errors.As(err, &none) || none.full {
		t.Fatalf("after the queue timeout: %v", err)
	}
	rec := httptest.NewRecorder()
	none.apiError().Write(rec)
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("answer %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}

	r = queueRouter(time.Minute, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := r.acquire(ctx, engine.RoleDecode, pickOptions{})
		first <- err
	}()
	waitQueued(t, r, 1)
	begin := time.Now()
	_, err = r.acquire(context.Background(), engine.RoleDecode, pickOptions{})
	if !errors.As(err, &none) || !none.full || time.Since(begin) > 5*time.Second {
		t.Fatalf("second request with a full queue: %v after %v", err, time.Since(begin))
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued request, cancelled: %v", err)
	}
}

// waitQueued waits until n requests wait in r's queue. The queue has no
// notification of its own; the count is polled, with a deadline.
func waitQueued(t *testing.T, r *Router, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for r.queued.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", r.queued.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
