package caddymlc

import (
	"sync"
	"sync/atomic"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// backend is one engine as the router sees it: where it is, its first PE
// in the NVSHMEM world, and how many requests it has in flight.
type backend struct {
	index    int
	url      string
	addr     string
	peStart  int
	inflight atomic.Int64
}

// readiness says whether engine i may get requests now.
type readiness interface {
	Ready(i int) bool
}

// balancer picks the least-loaded ready engine of a set. Load is the number
// of requests in flight, counted by acquire and given back by the release
// function it returns, which callers defer: the count comes back down on
// success, error, retry, client disconnect and panic alike.
type balancer struct {
	backends []*backend
	ready    func() readiness // nil before the fleet runs
	mu       sync.Mutex       // makes pick-and-increment atomic
	// observe, if set, is told every new in-flight count (metrics).
	observe func(addr string, inflight int64)
}

func newBalancer(eps []engine.Endpoint, ready func() readiness) *balancer {
	gpus := make([]int, len(eps))
	for i, ep := range eps {
		gpus[i] = ep.GPUs
	}
	starts := engine.DeviceIDStarts(gpus)
	b := &balancer{ready: ready}
	for i, ep := range eps {
		b.backends = append(b.backends, &backend{index: i, url: ep.URL(), addr: ep.Addr(), peStart: starts[i]})
	}
	return b
}

// acquire picks the least-loaded ready engine among candidates (ties go to
// the first), counts one more request on it and returns it with the
// function that counts the request back. An engine whose address is in
// avoid (one that just failed this request) is taken only when no other is
// ready. It returns nil when no candidate is ready.
func (b *balancer) acquire(candidates []int, avoid map[string]bool) (*backend, func()) {
	var rd readiness
	if b.ready != nil {
		rd = b.ready()
	}
	if rd == nil {
		return nil, nil
	}
	b.mu.Lock()
	best := b.leastLoaded(rd, candidates, avoid)
	if best == nil && len(avoid) > 0 {
		best = b.leastLoaded(rd, candidates, nil)
	}
	if best != nil {
		b.note(best, best.inflight.Add(1))
	}
	b.mu.Unlock()
	if best == nil {
		return nil, nil
	}
	var once sync.Once
	return best, func() { once.Do(func() { b.note(best, best.inflight.Add(-1)) }) }
}

func (b *balancer) note(be *backend, n int64) {
	if b.observe != nil {
		b.observe(be.addr, n)
	}
}

func (b *balancer) leastLoaded(rd readiness, candidates []int, avoid map[string]bool) *backend {
	var best *backend
	for _, i := range candidates {
		be := b.backends[i]
		if !rd.Ready(i) || avoid[be.addr] {
			continue
		}
		if best == nil || be.inflight.Load() < best.inflight.Load() {
			best = be
		}
	}
	return best
}

// inflight returns the in-flight count of every engine.
func (b *balancer) inflight() []int64 {
	out := make([]int64, len(b.backends))
	for i, be := range b.backends {
		out[i] = be.inflight.Load()
	}
	return out
}
