package caddymlc

import (
	"github.com/caddy-mlc/caddy-mlc/internal/cluster"
)

// With the cluster option, the replicas share how many requests each
// runs on a model's engines (see router/peerload.go): every 100 ms each
// publishes its count (router.Live.InFlight) on the channel
// <prefix>:<model>:inflight, and sets its gates' capacity from the sum of
// the others' (router.Live.SetPeerLoad), off the request's path. A replica not
// heard from for 500 ms (Redis out of reach included) counts for nothing:
// each gate then owns the engines' whole batch, as without the cluster.

// shareLoad shares model's in-flight requests with the other replicas,
// until the connection closes.
func (l *clusterLink) shareLoad(model string) {
	p := l.pooled
	p.shareMu.Lock()
	defer p.shareMu.Unlock()
	if p.loads == nil || p.loads[model] != nil {
		return // closed, or shared already
	}
	p.loads[model] = p.ShareCount(p.Key(model, "inflight"),
		func() int { return p.live.InFlight(model) },
		func(peers cluster.Peers) { p.live.SetPeerLoad(model, peers.Sum, peers.Busy) })
}
