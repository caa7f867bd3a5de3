package router

import (
	"sync"
	"sync/atomic"
	"time"
)

// Live is what the routers of a process share while they run: the live
// routers (the operator's view; package fleet's drains, restarts and
// autoscalers find engines through it), the other replicas' loads, the
// sink of prefix changes and the notifier of engine changes. The mlc app
// owns one and keeps it across reloads, when the old config's routers
// drain beside the new one's; every Router and Pool is made with it.
type Live struct {
	mu      sync.Mutex
	routers map[*Router]struct{}

	peerMu sync.Mutex // serialises the writers of peers
	// peers are the other replicas' loads by model, replaced whole on a
	// change (every 100 ms at most) and read without a lock by every
	// gate's refresh, which the request's path calls.
	peers atomic.Pointer[map[string]peerLoad]

	// prefixSink and sessionSink receive the prefix changes and the
	// sessions routed, for the other replicas (prefixshare.go,
	// sessionshare.go).
	prefixSink  sinkSlot[PrefixSink]
	sessionSink sinkSlot[SessionSink]

	// changes wakes the requests that wait for an engine: an engine's
	// state changed, a fleet was attached or drains, a breaker opened, a
	// router was handed over, dynamic engines came or went. One notifier
	// for all: a wake-up is cheap, a missed one is a stall.
	changes notifier

	// since is the created time of the served models: when the routers
	// began serving, the same in every answer and across reloads.
	since int64

	// sessions are where each session's last turn went (session.go).
	sessions sessionTable

	largeSlots chan struct{} // the large bodies decoded at once (decode.go)
	noFDs      descriptorLog // the log of running out of descriptors
}

// NewLive returns an empty Live.
func NewLive() *Live {
	return &Live{routers: map[*Router]struct{}{}, largeSlots: newLargeSlots(), since: time.Now().Unix()}
}

// add makes r live.
func (lv *Live) add(r *Router) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.routers[r] = struct{}{}
}

// remove drops r, closed.
func (lv *Live) remove(r *Router) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	delete(lv.routers, r)
}

// EnginesChanged wakes the requests that wait for an engine: something
// outside the router changed what they may find (a config started).
func (lv *Live) EnginesChanged() { lv.changes.notify() }
