package cluster

// FailedChecks carries the replicas' failed API key checks on the bus
// (channel <prefix>:auth-failures, each message a client address), so
// that an address held back after too many failures is held on every
// replica, not only the one it guessed on.
type FailedChecks struct {
	conn    *Conn
	channel string
}

// NewFailedChecks is the failed checks shared over c.
func NewFailedChecks(c *Conn) *FailedChecks {
	return &FailedChecks{conn: c, channel: c.Key("auth-failures")}
}

// Publish tells the other replicas of a failed check from addr, off the
// request's path (queued, dropped when the queue is full).
func (f *FailedChecks) Publish(addr string) { f.conn.Publish(f.channel, []byte(addr)) }

// Follow calls seen with each address the other replicas publish, until
// stop.
func (f *FailedChecks) Follow(seen func(addr string)) (stop func()) {
	return f.conn.Subscribe(f.channel, func(msgs [][]byte) {
		for _, m := range msgs {
			seen(string(m))
		}
	})
}
