package cluster

import (
	"sync"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// prefixPublisher is the process's router.PrefixSink while a cluster
// runs.
type prefixPublisher struct {
	conn     *Conn
	channels sync.Map // model → its channel's name
}

// PrefixLearned queues ev for the other replicas.
func (p *prefixPublisher) PrefixLearned(model string, ev router.PrefixEvent) {
	ch, ok := p.channels.Load(model)
	if !ok {
		ch, _ = p.channels.LoadOrStore(model, prefixChannel(p.conn, model))
	}
	p.conn.Publish(ch.(string), appendPrefixEvent(nil, ev))
}

func prefixChannel(c *Conn, model string) string { return c.Key(model, "prefix") }

// SharePrefixes publishes this process's prefix changes on the cluster,
// from the first call until Stop.
func (s *Sharing) SharePrefixes() {
	s.share.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopShare = s.live.SetPrefixSink(&prefixPublisher{conn: s.conn})
	})
}

// ApplyPrefixes applies the other replicas' prefix changes of model.
func (s *Sharing) ApplyPrefixes(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subscribed[model] {
		return
	}
	s.subscribed[model] = true
	s.conn.Subscribe(prefixChannel(s.conn, model), func(msgs [][]byte) {
		evs := make([]router.PrefixEvent, 0, len(msgs))
		for _, m := range msgs {
			if ev, err := decodePrefixEvent(m); err == nil {
				evs = append(evs, ev)
			}
		}
		applyPrefixEvents(s.live, model, evs)
	})
}
