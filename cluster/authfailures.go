package cluster

import "sync"

// FailedChecks carries the failed API key checks of every site's limiter
// (the bus channel <prefix>:auth-failures, each message a client
// address): each limiter that follows it hears every other one's, on
// this replica and on the others, so that an address is held on every
// site and replica, not only the one it guessed on. One per connection:
// the bus keeps one handler a channel, which FailedChecks is, fanning
// each message out to its followers.
type FailedChecks struct {
	conn    *Conn
	channel string

	mu        sync.Mutex
	followers map[*Follower]struct{}
	stop      func() // the bus subscription, while there are followers
}

// Follower is one limiter's place in FailedChecks.
type Follower struct {
	checks *FailedChecks
	seen   func(addr string)
}

// NewFailedChecks is the failed checks shared over c.
func NewFailedChecks(c *Conn) *FailedChecks {
	return &FailedChecks{conn: c, channel: c.Key("auth-failures"), followers: map[*Follower]struct{}{}}
}

// Follow calls seen with each address the other followers publish, and
// the other replicas, until the follower's Stop; seen must be quick.
func (f *FailedChecks) Follow(seen func(addr string)) *Follower {
	w := &Follower{checks: f, seen: seen}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.followers[w] = struct{}{}
	if f.stop == nil {
		f.stop = f.conn.Subscribe(f.channel, f.heard)
	}
	return w
}

// heard hands the other replicas' messages to every follower.
func (f *FailedChecks) heard(msgs [][]byte) {
	for _, m := range msgs {
		f.tell(string(m), nil)
	}
}

// tell calls every follower but except with addr.
func (f *FailedChecks) tell(addr string, except *Follower) {
	f.mu.Lock()
	seen := make([]func(string), 0, len(f.followers))
	for w := range f.followers {
		if w != except {
			seen = append(seen, w.seen)
		}
	}
	f.mu.Unlock()
	for _, fn := range seen {
		fn(addr)
	}
}

// Publish tells the other followers of a failed check from addr, at
// once, and the other replicas, off the request's path (queued, dropped
// when the queue is full).
func (w *Follower) Publish(addr string) {
	w.checks.conn.Publish(w.checks.channel, []byte(addr))
	w.checks.tell(addr, w)
}

// Stop ends the follower; the last one's ends the subscription.
func (w *Follower) Stop() {
	f := w.checks
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.followers, w)
	if len(f.followers) == 0 && f.stop != nil {
		f.stop()
		f.stop = nil
	}
}
