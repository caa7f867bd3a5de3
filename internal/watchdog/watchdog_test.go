package watchdog

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestChecksUntilDone: a check that asks for more waits is called again,
// and one that returns 0 is the last.
func TestChecksUntilDone(t *testing.T) {
	var n atomic.Int32
	done := make(chan struct{})
	Start(time.Microsecond, func() time.Duration {
		if n.Add(1) == 3 {
			close(done)
			return 0
		}
		return time.Microsecond
	})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the check ran %d times, want 3", n.Load())
	}
}

// TestStopEndsTheWatch: after Stop returns, at most the one check already
// under way runs; no other starts.
func TestStopEndsTheWatch(t *testing.T) {
	var n atomic.Int32
	ran := make(chan struct{}, 1)
	d := Start(time.Microsecond, func() time.Duration {
		n.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
		return time.Microsecond
	})
	<-ran
	d.Stop()
	at := n.Load()
	// Absence cannot be waited for: let the period pass many times over.
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if got := n.Load(); got > at+1 {
		t.Fatalf("%d checks ran after Stop returned", got-at)
	}
}

// TestImmediateFireSeesTheTimer is the shape that raced: a check that
// fires at once and asks to be called again. Under -race, a check that
// read the timer before Start stored it is reported.
func TestImmediateFireSeesTheTimer(t *testing.T) {
	for range 200 {
		done := make(chan struct{})
		var n atomic.Int32
		Start(0, func() time.Duration {
			if n.Add(1) == 2 {
				close(done)
				return 0
			}
			return 1
		})
		<-done
	}
}
