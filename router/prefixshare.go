package router

import "sync/atomic"

// Several Caddy replicas in front of the same engines each keep a prefix
// index (prefix.go) of what they routed. Alone, each sees a third of the
// traffic, and sends a prefix to an engine that another replica's requests
// already filled with it, or fills an engine's cache with a prefix another
// replica keeps elsewhere. Sharing what each learns gives them one view:
// the prefix tracker hands every change it makes to its index to a
// PrefixSink (package cluster's, which publishes it in its wire form), and
// the cluster applies the other replicas' changes to the local indexes
// (ApplyPrefixEvent). An event is what the tracker did, so that each replica's index
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

// SetPrefixSink makes s the process's PrefixSink (nil: none). It returns
// a function that removes s, unless another sink replaced it since.
func (lv *Live) SetPrefixSink(s PrefixSink) (remove func()) {
	return lv.prefixSink.set(s, s == nil)
}

// share hands the tracker's change on the route's engine to the sink.
func share(r *Route, kind PrefixEventKind, chain []uint64, tokens, predicted int) {
	s, ok := r.Engine.internal().pool.live.prefixSink.get()
	if !ok {
		return
	}
	s.PrefixLearned(r.Request.Model, PrefixEvent{Kind: kind, Engine: r.Engine.Addr(), Chain: chain, Tokens: tokens, Predicted: predicted})
}

// sinkSlot holds the process's sink of one kind of change it tells the
// other replicas (prefixes, sessions); empty (the usual case, one
// replica) it costs a change one atomic load.
type sinkSlot[S any] struct{ p atomic.Pointer[sinkBox[S]] }

type sinkBox[S any] struct{ s S }

// set makes s the sink (none: no sink); the function it returns removes
// s, unless another sink replaced it since.
func (sl *sinkSlot[S]) set(s S, none bool) (remove func()) {
	if none {
		sl.p.Store(nil)
		return func() {}
	}
	box := &sinkBox[S]{s}
	sl.p.Store(box)
	return func() { sl.p.CompareAndSwap(box, nil) }
}

// get returns the sink, if any.
func (sl *sinkSlot[S]) get() (S, bool) {
	box := sl.p.Load()
	if box == nil {
		var none S
		return none, false
	}
	return box.s, true
}

// ApplyPrefixEvent makes another replica's change to the engine's prefix
// index, bounded by the engine's capacity as the router's own changes
// are (package cluster applies them to every router's engine at the
// event's address).
func (u *Upstream) ApplyPrefixEvent(ev PrefixEvent) {
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
