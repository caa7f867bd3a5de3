package fair

import (
	"cmp"
	"slices"
	"time"
)

// Counters count what happened to requests since the queue was made, for
// metrics. A request is counted once in Submitted, and once in Immediate,
// Granted, Released or Rejected by Submit or a grant; a granted request
// counts once more in Finished, or in Canceled or TimedOut when its
// caller gave up as it was granted; a waiting one leaves through Granted,
// Released, PushedOut, Closed, Canceled or TimedOut.
type Counters struct {
	Submitted uint64
	// Immediate were granted as they were submitted.
	Immediate uint64
	// Granted were granted after waiting, as capacity freed.
	Granted uint64
	// Released were granted by Release.
	Released  uint64
	Finished  uint64
	Rejected  uint64
	PushedOut uint64
	TimedOut  uint64
	Canceled  uint64
	Closed    uint64
}

// Stats is the queue's state and counters at one moment.
type Stats struct {
	Limits         Limits
	Waiting        int
	WaitingTokens  int64
	InFlight       int
	InFlightTokens int64
	Counters
}

// Stats returns the queue's state and counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{
		Limits:         q.limits,
		Waiting:        q.waiting,
		WaitingTokens:  q.waitingTokens,
		InFlight:       q.inFlight,
		InFlightTokens: q.inFlightToks,
		Counters:       q.counts,
	}
}

// TenantState is one tenant's requests in one band.
type TenantState struct {
	Band           int           `json:"band"`
	Tenant         string        `json:"tenant"`
	Waiting        int           `json:"waiting"`
	WaitingTokens  int64         `json:"waiting_tokens"`
	InFlight       int           `json:"in_flight"`
	InFlightTokens int64         `json:"in_flight_tokens"`
	OldestWait     time.Duration `json:"oldest_wait_ns"`
}

// Snapshot returns the tenants with requests waiting or in flight, by
// band, highest first, then by tenant.
func (q *Queue) Snapshot() []TenantState {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []TenantState
	for _, b := range q.bands {
		for _, f := range b.flows {
			if f.waiting == 0 && f.inFlight == 0 {
				continue
			}
			s := TenantState{
				Band:           b.level,
				Tenant:         f.tenant,
				Waiting:        f.waiting,
				WaitingTokens:  f.waitingTokens,
				InFlight:       f.inFlight,
				InFlightTokens: f.inFlightTokens,
			}
			if f.head != nil {
				s.OldestWait = now.Sub(f.head.enqueued)
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b TenantState) int {
		if c := cmp.Compare(b.Band, a.Band); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	return out
}
