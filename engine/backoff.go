package engine

import "time"

// Restart backoff: the first restart waits minBackoff, each failed attempt
// doubles the wait up to maxBackoff. An engine that stayed up for
// backoffReset before dying starts again from minBackoff.
const (
	minBackoff   = 200 * time.Millisecond
	maxBackoff   = 10 * time.Second
	backoffReset = time.Minute
)

// backoff is the restart delay of one engine.
type backoff struct{ next time.Duration }

// delay returns the wait before the next attempt and doubles the next one.
func (b *backoff) delay() time.Duration {
	d := max(b.next, minBackoff)
	b.next = min(2*d, maxBackoff)
	return d
}

// reset makes the next delay minBackoff again.
func (b *backoff) reset() { b.next = 0 }
