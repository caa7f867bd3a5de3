package cluster

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// A shared count is a number each replica has (the requests it runs on a
// model's engines) and wants the others to know: ShareCount publishes the
// local one on the bus every loadInterval, and hands the sum of the
// others' latest to a function, at the same pace. A replica not heard
// from within loadTTL (gone, or Redis out of reach) counts for nothing:
// without Redis each replica is on its own, as without the cluster.
const (
	loadInterval = 100 * time.Millisecond
	loadTTL      = 5 * loadInterval
)

// Peers is what the other replicas said of a shared count.
type Peers struct {
	// Sum is the sum of their counts.
	Sum int
	// Busy is how many of them have a count above 0.
	Busy int
}

// peerCount is one replica's latest count.
type peerCount struct {
	n    int
	seen time.Time
}

// ShareCount publishes local() on channel (a name from Key) every
// loadInterval, and calls apply with what the other replicas published
// there, until the returned function is called, which calls apply with
// no peers last. local and apply run on the sharer's goroutine, never on
// a request's path; neither waits on Redis.
func (c *Conn) ShareCount(channel string, local func() int, apply func(Peers)) (stop func()) {
	var mu sync.Mutex
	peers := map[uint64]peerCount{}
	unsubscribe := c.Subscribe(channel, func(msgs [][]byte) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			id, n, ok := decodeCount(m)
			if ok && id != c.id {
				peers[id] = peerCount{n: n, seen: now}
			}
		}
	})
	done := make(chan struct{})
	finished := make(chan struct{})
	goroutine.Go(c.log, "sharing "+channel, func() {
		defer close(finished)
		tick := time.NewTicker(loadInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.ctx.Done():
				return
			case <-tick.C:
			}
			c.Publish(channel, appendCount(nil, c.id, local()))
			now := time.Now()
			var p Peers
			mu.Lock()
			for id, pc := range peers {
				if now.Sub(pc.seen) > loadTTL {
					delete(peers, id)
					continue
				}
				p.Sum += pc.n
				if pc.n > 0 {
					p.Busy++
				}
			}
			mu.Unlock()
			apply(p)
		}
	}, func(any) { apply(Peers{}) })
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			unsubscribe()
			apply(Peers{})
		})
	}
}

// A count's wire form: the replica's id (8 bytes, little-endian), then
// the count (a uvarint).
func appendCount(b []byte, id uint64, n int) []byte {
	b = binary.LittleEndian.AppendUint64(b, id)
	return binary.AppendUvarint(b, uint64(max(n, 0)))
}

func decodeCount(b []byte) (id uint64, n int, ok bool) {
	if len(b) < 9 {
		return 0, 0, false
	}
	v, k := binary.Uvarint(b[8:])
	if k <= 0 || 8+k != len(b) || v > 1<<31 {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b), int(v), true
}
