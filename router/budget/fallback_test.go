package budget

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// flakyStore is a Store that fails while down is set.
type flakyStore struct {
	Store
	down atomic.Bool
}

func (s *flakyStore) Update(ctx context.Context, key string, fn func(*State)) error {
	if s.down.Load() {
		return errors.New("out of reach")
	}
	return s.Store.Update(ctx, key, fn)
}

// While the shared store fails, a tenant is decided on the fallback's
// buckets at 1/Replicas of its budget, with no error; when the store comes
// back, on the store's again, at the whole budget.
func TestFallbackAtAShareWhileTheStoreFails(t *testing.T) {
	c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	shared := &flakyStore{Store: NewMemoryStore()}
	l, err := New(Options{Rules: []Rule{{Tenant: "a", TokensPerMinute: 300, RequestsPerMinute: 30}},
		Store: shared, Fallback: NewMemoryStore(), Replicas: 3, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	_, d := reserve(t, l, "a", 50)
	if d.Tokens.Limit != 300 || d.Tokens.Remaining != 250 {
		t.Fatalf("shared: %+v", *d.Tokens)
	}
	shared.down.Store(true)
	r, d := reserve(t, l, "a", 60)
	if d.Tokens.Limit != 100 || d.Tokens.Remaining != 40 || d.Requests.Limit != 10 {
		t.Fatalf("fallback: tokens %+v requests %+v, want a third of each", *d.Tokens, *d.Requests)
	}
	if _, d := reserve(t, l, "a", 60); d.Allowed {
		t.Fatal("the fallback admitted more than its share")
	}
	// A refund while the store fails goes to the fallback.
	if err := r.Settle(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if _, d := reserve(t, l, "a", 60); !d.Allowed {
		t.Fatal("the refund did not reach the fallback")
	}
	shared.down.Store(false)
	_, d = reserve(t, l, "a", 50)
	if d.Tokens.Limit != 300 || d.Tokens.Remaining != 200 {
		t.Fatalf("back on the shared store: %+v", *d.Tokens)
	}
}

// Without a fallback the store's error is the caller's.
func TestNoFallbackReturnsTheError(t *testing.T) {
	shared := &flakyStore{Store: NewMemoryStore()}
	shared.down.Store(true)
	l, err := New(Options{Rules: []Rule{{Tenant: "a", TokensPerMinute: 300}}, Store: shared})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Reserve(context.Background(), "a", 10); err == nil {
		t.Fatal("no error from a failing store without a fallback")
	}
}
