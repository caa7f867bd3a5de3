package caddymlc

import (
	"sync"

	"github.com/caddy-mlc/caddy-mlc/internal/cluster"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// With the cluster option, the replicas share their prefix indexes (see
// router/prefixshare.go): each change a router's prefix tracker makes is
// queued for the cluster's bus (published in batches, off the request's
// path, dropped when the queue is full) on the channel
// <prefix>:<model>:prefix, and the other replicas' changes are applied to
// the local indexes.

// prefixPublisher is the process's router.PrefixSink while a cluster
// runs.
type prefixPublisher struct {
	conn     *cluster.Conn
	channels sync.Map // model → its channel's name
}

// PrefixLearned queues ev for the other replicas.
func (p *prefixPublisher) PrefixLearned(model string, ev router.PrefixEvent) {
	ch, ok := p.channels.Load(model)
	if !ok {
		ch, _ = p.channels.LoadOrStore(model, prefixChannel(p.conn, model))
	}
	p.conn.Publish(ch.(string), router.AppendPrefixEvent(nil, ev))
}

func prefixChannel(c *cluster.Conn, model string) string { return c.Key(model, "prefix") }

// sharePrefixes publishes this process's prefix changes on the cluster,
// from when its config starts until the connection closes.
func (l *clusterLink) sharePrefixes() {
	p := l.pooled
	p.share.Do(func() {
		p.shareMu.Lock()
		defer p.shareMu.Unlock()
		p.stopShare = p.live.SetPrefixSink(&prefixPublisher{conn: p.Conn})
	})
}

// applyPrefixes applies the other replicas' prefix changes of model.
func (l *clusterLink) applyPrefixes(model string) {
	p := l.pooled
	p.shareMu.Lock()
	defer p.shareMu.Unlock()
	if p.subscribed[model] {
		return
	}
	p.subscribed[model] = true
	p.Subscribe(prefixChannel(p.Conn, model), func(msgs [][]byte) {
		evs := make([]router.PrefixEvent, 0, len(msgs))
		for _, m := range msgs {
			if ev, err := router.DecodePrefixEvent(m); err == nil {
				evs = append(evs, ev)
			}
		}
		p.live.ApplyPrefixEvents(model, evs)
	})
}
