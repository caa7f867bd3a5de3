package router

import (
	"testing"
	"time"
)

func TestBreakerOpensCoolsAndCloses(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &breaker{now: func() time.Time { return now }}
	const pid = 42
	for i := range breakerThreshold - 1 {
		if opened := b.failure(pid); opened {
			t.Fatalf("failure %d opened the breaker", i+1)
		}
	}
	b.success(pid) // a success in between resets the count
	for range breakerThreshold - 1 {
		b.failure(pid)
	}
	if st := b.state(pid); st != breakerClosed {
		t.Fatalf("after %d failures and a success: %v", breakerThreshold-1, st)
	}
	if !b.failure(pid) || b.state(pid) != breakerOpen || b.admit(pid) {
		t.Fatalf("%d failures in a row: want open and not admitting, got %v", breakerThreshold, b.state(pid))
	}
	now = now.Add(breakerMinCooldown)
	if st := b.state(pid); st != breakerHalfOpen {
		t.Fatalf("after the cool-down: %v", st)
	}
	if !b.admit(pid) {
		t.Fatal("half-open breaker refused its trial")
	}
	if b.admit(pid) || b.state(pid) != breakerOpen {
		t.Fatal("a second call went through while the trial is in flight")
	}
	// The trial fails: open again, for twice as long.
	b.failure(pid)
	now = now.Add(breakerMinCooldown)
	if st := b.state(pid); st != breakerOpen {
		t.Fatalf("a failed trial should double the cool-down; state %v", st)
	}
	now = now.Add(breakerMinCooldown)
	if !b.admit(pid) {
		t.Fatal("no trial after the doubled cool-down")
	}
	b.success(pid)
	if st := b.state(pid); st != breakerClosed {
		t.Fatalf("a successful trial should close the breaker: %v", st)
	}
}

func TestBreakerForgetsAnotherProcess(t *testing.T) {
	b := &breaker{}
	for range breakerThreshold {
		b.failure(1)
	}
	if b.state(1) != breakerOpen {
		t.Fatal("not open")
	}
	if st := b.state(2); st != breakerClosed {
		t.Fatalf("a restarted engine (new pid) inherits the old one's breaker: %v", st)
	}
}

func TestBreakerAbandonedTrialExpires(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &breaker{now: func() time.Time { return now }}
	for range breakerThreshold {
		b.failure(7)
	}
	now = now.Add(breakerMinCooldown)
	if !b.admit(7) {
		t.Fatal("no trial")
	}
	// The trial's client left: no verdict ever comes.
	now = now.Add(breakerMaxCooldown)
	if !b.admit(7) {
		t.Fatal("an abandoned trial keeps the engine out for good")
	}
}
