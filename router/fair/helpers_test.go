package fair

import (
	"testing"
)

// recorder drives a queue of capacity one request by hand: it records
// the order of grants and finishes each granted ticket on demand.
type recorder struct {
	t       *testing.T
	q       *Queue
	granted []*Ticket // in order of grant
	done    int       // granted tickets finished so far
}

func newRecorder(t *testing.T, cfg Config, limits Limits) *recorder {
	t.Helper()
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{t: t, q: q}
	q.onGrant = func(tk *Ticket) { r.granted = append(r.granted, tk) }
	q.SetLimits(limits)
	return r
}

func (r *recorder) submit(tenant string, band int, cost int64) *Ticket {
	r.t.Helper()
	tk, err := r.q.Submit(Item{Tenant: tenant, Band: band, Cost: cost, Timeout: -1})
	if err != nil {
		r.t.Fatalf("submit %s/%d: %v", tenant, band, err)
	}
	return tk
}

// step finishes the oldest unfinished grant with its estimated cost (or
// real when not negative) and returns the grant it made room for, nil when
// none.
func (r *recorder) step(real int64) *Ticket {
	r.t.Helper()
	if r.done >= len(r.granted) {
		r.t.Fatal("nothing in flight to finish")
	}
	tk := r.granted[r.done]
	r.done++
	if real < 0 {
		real = tk.item.Cost
	}
	before := len(r.granted)
	r.q.Finish(tk, real)
	switch len(r.granted) - before {
	case 0:
		return nil
	case 1:
		return r.granted[before]
	}
	r.t.Fatalf("one finish made %d grants at capacity one", len(r.granted)-before)
	return nil
}

// isReady reports whether tk's Ready channel is closed.
func isReady(tk *Ticket) bool {
	select {
	case <-tk.Ready():
		return true
	default:
		return false
	}
}
