package fair

import (
	"context"
	"time"
)

const (
	stateWaiting = iota
	stateGranted
	stateDone // finished, refused, timed out or canceled
)

// Ticket is a submitted request: waiting, granted, or done.
type Ticket struct {
	q     *Queue
	item  Item
	seq   uint64
	ready chan struct{} // closed when granted or refused

	// Guarded by q.mu.
	state      int
	err        error
	flow       *flow
	prev, next *Ticket
	start      float64
	finish     float64
	prevFinish float64
	enqueued   time.Time
	granted    time.Time
	deadline   time.Time
}

// Item returns the request as submitted (its cost at least 1).
func (t *Ticket) Item() Item { return t.item }

// Ready is closed when the ticket is granted or refused.
func (t *Ticket) Ready() <-chan struct{} { return t.ready }

// Waited returns how long the ticket waited to be granted: 0 for one
// granted at submission, the wait so far for one still waiting.
func (t *Ticket) Waited() time.Duration {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.granted.IsZero() {
		return t.q.now().Sub(t.enqueued)
	}
	return t.granted.Sub(t.enqueued)
}

// Wait blocks until the ticket is granted (nil), refused (ErrClosed, a
// *FullError), its timeout passes (a *TimeoutError) or ctx ends (the
// context's cause). Whatever error it returns, the request is out of the
// queue and holds nothing: when a grant races with the timeout or ctx,
// the error wins and the grant is given back.
func (t *Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.ready:
		return t.readyErr()
	default:
	}
	var expired <-chan time.Time
	if !t.deadline.IsZero() {
		timer := time.NewTimer(time.Until(t.deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-t.ready:
		return t.readyErr()
	case <-ctx.Done():
		return t.abandon(context.Cause(ctx), false)
	case <-expired:
		return t.abandon(nil, true)
	}
}

func (t *Ticket) readyErr() error {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return t.err
}

// abandon takes t out of the queue because its caller stopped waiting.
func (t *Ticket) abandon(cause error, timedOut bool) error {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if timedOut {
		cause = &TimeoutError{Waited: q.now().Sub(t.enqueued), Tenant: t.item.Tenant, Band: t.item.Band}
	}
	switch t.state {
	case stateWaiting:
		q.drop(t, cause)
	case stateGranted:
		// Granted as the caller gave up: nothing was served.
		q.finish(t, 0)
		t.err = cause
		q.dispatch()
	default:
		return t.err
	}
	if timedOut {
		q.counts.TimedOut++
	} else {
		q.counts.Canceled++
	}
	return cause
}

// Enqueue submits it and waits for its grant: Submit then Wait. The
// ticket it returns is granted, to be finished with Finish.
func (q *Queue) Enqueue(ctx context.Context, it Item) (*Ticket, error) {
	t, err := q.Submit(it)
	if err != nil {
		return nil, err
	}
	if err := t.Wait(ctx); err != nil {
		return nil, err
	}
	return t, nil
}
