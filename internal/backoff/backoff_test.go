package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNextDoublesUpToMaxAndResets(t *testing.T) {
	b := Backoff{Min: 200 * time.Millisecond, Max: 1 * time.Second}
	want := []time.Duration{200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d: %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 200*time.Millisecond {
		t.Fatalf("after Reset: %v, want 200ms", got)
	}
}

func TestAttemptMatchesNextWithoutCounting(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 640 * time.Millisecond}
	for n := 1; n <= 9; n++ {
		want := time.Duration(1<<min(n-1, 6)) * 10 * time.Millisecond
		if got := b.Attempt(n); got != want {
			t.Fatalf("Attempt(%d) = %v, want %v", n, got, want)
		}
	}
	if got := b.Next(); got != 10*time.Millisecond {
		t.Fatalf("Next after Attempts = %v, want 10ms: Attempt must not count", got)
	}
	if got := b.Attempt(1 << 40); got != 640*time.Millisecond {
		t.Fatalf("Attempt of a long row = %v, want the max", got)
	}
}

func TestMinAboveMaxIsCapped(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 500 * time.Millisecond}
	if got := b.Next(); got != 500*time.Millisecond {
		t.Fatalf("Next = %v, want 500ms", got)
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Min: time.Hour, Max: time.Hour}
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a done context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
