package router

import (
	"maps"

	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// Several Caddy replicas in front of the same engines each have a gate
// (admit.go) that, alone, would send the engines their whole batch: with
// N replicas the engines would hold N batches and serve them in their
// FIFO, and the replicas' fair queues would order nothing. So the
// replicas tell one another how many requests each runs on a model's
// engines (the mlc app's cluster publishes InFlight, off the request's
// path: package cluster), and each gate takes what the others leave: its capacity is the
// engines' batches less the others' requests (SetPeerLoad), never below
// its fair share of them, so that no replica starves while another holds
// more than its share (its own capacity shrinks as its requests end).
// Without word from the others (no cluster, or Redis out of reach) a gate
// owns the whole batch, as one replica does.

// peerLoad is what the other replicas run on a model's engines.
type peerLoad struct {
	inFlight int // their requests in flight
	busy     int // how many of them run any
}

// SetPeerLoad records that the other replicas run inFlight requests on
// model's engines, busy of them running any, and sets the capacity of
// model's gates from it. SetPeerLoad(model, 0, 0): none.
func (lv *Live) SetPeerLoad(model string, inFlight, busy int) {
	lv.peerMu.Lock()
	p := peerLoad{inFlight: max(inFlight, 0), busy: max(busy, 0)}
	var old map[string]peerLoad
	if m := lv.peers.Load(); m != nil {
		old = *m
	}
	changed := old[model] != p
	if changed {
		next := maps.Clone(old)
		if next == nil {
			next = map[string]peerLoad{}
		}
		if p == (peerLoad{}) {
			delete(next, model)
		} else {
			next[model] = p
		}
		lv.peers.Store(&next)
	}
	lv.peerMu.Unlock()
	if !changed {
		return
	}
	for _, r := range lv.routersOf(model) {
		r.gate.refreshLimits()
	}
}

// peersOf returns what the other replicas run on model's engines.
func (lv *Live) peersOf(model string) peerLoad {
	if m := lv.peers.Load(); m != nil {
		return (*m)[model]
	}
	return peerLoad{}
}

// Admitted is the router's gate and the requests it has let through to
// the engines that have not ended (what the other replicas are told);
// nil, 0 for a router that gates nothing. Routers kept across a reload
// share a gate.
func (r *Router) Admitted() (gate *fair.Queue, inFlight int) {
	q := r.gate.queue
	if q == nil || r.gate.batch <= 0 {
		return nil, 0
	}
	return q, q.Stats().InFlight
}

// routersOf returns the live routers of model.
func (lv *Live) routersOf(model string) []*Router {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	var out []*Router
	for r := range lv.routers {
		if r.Model == model {
			out = append(out, r)
		}
	}
	return out
}

// capacity is what a gate lets through to ready engines of batch each,
// with the other replicas running p on them: the engines' batches less
// p's requests, but at least the gate's fair share of them (the batches
// over the replicas running any, this one included) and one request per
// engine.
func capacity(ready, batch int, p peerLoad) int {
	total := ready * batch
	if p.inFlight == 0 {
		return total
	}
	share := (total + p.busy) / (p.busy + 1) // rounded up
	return max(total-p.inFlight, share, ready)
}
