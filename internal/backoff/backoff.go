// Package backoff is the module's one doubling backoff: the wait starts at
// Min and doubles up to Max.
package backoff

import (
	"context"
	"time"
)

// Backoff hands out the waits of attempts in a row: the first is Min, and
// Reset makes it the first again. Setting Min and Max is all it needs.
type Backoff struct {
	Min, Max time.Duration
	n        int // waits handed out since the last Reset
}

// Next returns the wait before the next attempt and counts it.
func (b *Backoff) Next() time.Duration {
	b.n++
	return b.Attempt(b.n)
}

// Reset makes the next wait Min again.
func (b *Backoff) Reset() { b.n = 0 }

// Attempt returns the wait before attempt n (from 1) of a row, without
// counting it: for callers that keep their own count.
func (b *Backoff) Attempt(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d > 0 && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Wait waits out Next, or returns ctx's error when ctx is done first.
func (b *Backoff) Wait(ctx context.Context) error {
	return Sleep(ctx, b.Next())
}

// Sleep waits d, or returns ctx's error when ctx is done first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
