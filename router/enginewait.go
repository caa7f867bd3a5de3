package router

import (
	"context"
	"sync/atomic"
	"time"
)

// engineWait sums the time one choice spends waiting on something other
// than the router: an engine's answer (to its first byte, its body, each
// event of its stream), the queue for an engine, a retry's backoff. What
// is left of the time to first token is the router's own part: parsing,
// tokenizing, choosing, encoding, writing (router_overhead_seconds). It
// travels in the context, as net/http/httptrace's hooks do, so that the
// engine client finds it without every call site passing it.
type engineWait struct{ ns atomic.Int64 }

type engineWaitKey struct{}

// withEngineWait returns ctx carrying w.
func withEngineWait(ctx context.Context, w *engineWait) context.Context {
	return context.WithValue(ctx, engineWaitKey{}, w)
}

// engineWaitOf returns the wait clock ctx carries, or nil.
func engineWaitOf(ctx context.Context) *engineWait {
	w, _ := ctx.Value(engineWaitKey{}).(*engineWait)
	return w
}

// since adds the time since t0. A nil clock counts nothing.
func (w *engineWait) since(t0 time.Time) {
	if w != nil {
		w.ns.Add(int64(time.Since(t0)))
	}
}

// total is the time waited so far.
func (w *engineWait) total() time.Duration {
	if w == nil {
		return 0
	}
	return time.Duration(w.ns.Load())
}
