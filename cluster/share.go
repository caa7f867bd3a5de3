package cluster

import (
	"sync"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// Sharing is what a connection shares of one process's routers (their
// router.Live): the in-flight requests of each model, the prefix indexes
// and where sessions went. It runs until Stop.
//
// Loads (see router/peerload.go): every 100 ms each replica publishes its
// count (router.Live.InFlight) on the channel <prefix>:<model>:inflight,
// and sets its gates' capacity from the sum of the others'
// (router.Live.SetPeerLoad), off the request's path. A replica not heard
// from for 500 ms (Redis out of reach included) counts for nothing: each
// gate then owns the engines' whole batch, as without the cluster.
//
// Prefixes (see router/prefixshare.go): each change a router's prefix
// tracker makes is queued for the bus (published in batches, off the
// request's path, dropped when the queue is full) on the channel
// <prefix>:<model>:prefix, and the other replicas' changes are applied to
// the local indexes.
//
// Sessions (see router/sessionshare.go): where each replica sends a
// session's turn is published on <prefix>:<model>:session, and the
// others take it into their tables.
type Sharing struct {
	conn          *Conn
	live          *router.Live // whose loads, prefixes and sessions it shares
	share         sync.Once
	shareSessions sync.Once
	mu            sync.Mutex
	stopShare     func()
	stopSessions  func()
	subscribed    map[string]bool   // models whose prefix events it applies
	sessions      map[string]bool   // models whose session events it applies
	loads         map[string]func() // models whose in-flight requests it shares, and how to stop
}

// NewSharing shares live's loads, prefixes and sessions over c, as its
// methods are called.
func NewSharing(c *Conn, live *router.Live) *Sharing {
	return &Sharing{conn: c, live: live, subscribed: map[string]bool{}, sessions: map[string]bool{}, loads: map[string]func(){}}
}

// Stop stops sharing prefixes, sessions and loads; the connection stays
// open.
func (s *Sharing) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stop := range []func(){s.stopShare, s.stopSessions} {
		if stop != nil {
			stop()
		}
	}
	for _, stop := range s.loads {
		stop()
	}
	s.loads = nil
}
