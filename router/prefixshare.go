package router

import "github.com/caddy-mlc/caddy-mlc/engine"

// Several Caddy replicas in front of the same engines each keep a prefix
// index (prefix.go) of what they routed. Alone, each sees a third of the
// traffic, and sends a prefix to an engine that another replica's requests
// already filled with it, or fills an engine's cache with a prefix another
// replica keeps elsewhere. Sharing what each learns gives them one view:
// the prefix tracker hands every change it makes to its index to a
// PrefixSink (package cluster's, which publishes it in its wire form), and
// ApplyPrefixEvents makes the other replicas' changes to the local
// indexes. An event is what the tracker did, so that each replica's index
// follows the same steps as one router's that routed every request.

// PrefixEventKind is the tracker's step an event repeats.
type PrefixEventKind uint8

// The tracker's steps (see prefixTracker).
const (
	// PrefixRouted: a request carrying Chain was sent to the engine.
	PrefixRouted PrefixEventKind = iota + 1
	// PrefixMatched: the engine said it held Tokens of Chain (prep_recv).
	PrefixMatched
	// PrefixFinished: the engine computed Chain; Tokens, when not -1, is
	// what its cache held of it where the index expected Predicted.
	PrefixFinished
)

// PrefixEvent is one change a replica made to an engine's prefix index.
type PrefixEvent struct {
	Kind PrefixEventKind
	// Engine is the engine's address (host:port), which names it on
	// every replica of one config.
	Engine    string
	Chain     []uint64
	Tokens    int
	Predicted int
}

// PrefixSink receives the changes a replica makes to its prefix indexes,
// on the request's path: it must not block (it queues them).
type PrefixSink interface {
	PrefixLearned(model string, ev PrefixEvent)
}

type sinkBox struct{ PrefixSink }

// SetPrefixSink makes s the process's PrefixSink (nil: none). It returns
// a function that removes s, unless another sink replaced it since.
func (lv *Live) SetPrefixSink(s PrefixSink) (remove func()) {
	if s == nil {
		lv.prefixSink.Store(nil)
		return func() {}
	}
	box := &sinkBox{s}
	lv.prefixSink.Store(box)
	return func() { lv.prefixSink.CompareAndSwap(box, nil) }
}

// share hands the tracker's change on the route's engine to the sink.
func share(r *Route, kind PrefixEventKind, chain []uint64, tokens, predicted int) {
	box := r.Engine.internal().fleet.live.prefixSink.Load()
	if box == nil {
		return
	}
	box.PrefixLearned(r.Request.Model, PrefixEvent{Kind: kind, Engine: r.Engine.Addr(), Chain: chain, Tokens: tokens, Predicted: predicted})
}

// ApplyPrefixEvents makes other replicas' changes to the prefix indexes of
// model's engines, on the routers that keep one (a prefix-reading
// policy's). An event of an engine this process does not route to is
// ignored; every index stays bounded by its engine's capacity, as its own
// changes keep it.
func (lv *Live) ApplyPrefixEvents(model string, evs []PrefixEvent) {
	engines := lv.prefixEngines(model)
	if len(engines) == 0 {
		return
	}
	applied := sharedMetrics().prefixEvents
	for _, ev := range evs {
		us := engines[ev.Engine]
		for _, u := range us {
			p, capacity := &u.prefixes, u.prefixCapacity()
			switch ev.Kind {
			case PrefixRouted:
				p.learn(ev.Chain, -1, capacity)
			case PrefixMatched:
				p.learn(ev.Chain, ev.Tokens, capacity)
			case PrefixFinished:
				if ev.Tokens >= 0 {
					p.correct(ev.Predicted, ev.Tokens, capacity)
				}
				p.hold(ev.Chain)
			}
		}
		if len(us) > 0 {
			applied.WithLabelValues(ev.Kind.String()).Inc()
		}
	}
}

// String names the kind as the metrics label it.
func (k PrefixEventKind) String() string {
	switch k {
	case PrefixRouted:
		return "routed"
	case PrefixMatched:
		return "matched"
	case PrefixFinished:
		return "finished"
	}
	return "unknown"
}

// prefixEngines returns the engines of model's routers that keep a prefix
// index, by address.
func (lv *Live) prefixEngines(model string) map[string][]*Upstream {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	var out map[string][]*Upstream
	seen := map[*Upstream]bool{}
	add := func(u *Upstream) {
		if seen[u] {
			return
		}
		seen[u] = true
		if out == nil {
			out = map[string][]*Upstream{}
		}
		out[u.addr] = append(out[u.addr], u)
	}
	for r := range lv.routers {
		if r.Model != model || !r.readsPrefixes {
			continue
		}
		if r.handle != nil {
			if lf := r.handle.get(); lf != nil {
				for _, u := range lf.upstreams {
					add(u)
				}
			}
		}
		if r.dynamic != nil {
			for _, role := range []string{"", engine.RolePrefill, engine.RoleDecode} {
				for _, u := range r.dynamic.Engines(role) {
					add(u)
				}
			}
		}
	}
	return out
}
