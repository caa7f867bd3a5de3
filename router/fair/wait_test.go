package fair

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A canceled waiter leaves the queue at once and is never granted; the
// requests behind it are.
func TestCancelRemovesWaiter(t *testing.T) {
	r := newRecorder(t, Config{}, one)
	holder := r.submit("a", 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.q.Enqueue(ctx, Item{Tenant: "b", Cost: 1})
		errc <- err
	}()
	waitFor(t, "b to wait", func() bool { return r.q.Stats().Waiting == 1 })
	c := r.submit("c", 0, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Enqueue: %v", err)
	}
	if s := r.q.Stats(); s.Waiting != 1 || s.Canceled != 1 {
		t.Fatalf("after cancel: %+v", s)
	}
	r.q.Finish(holder, 1)
	if len(r.granted) != 2 || r.granted[1] != c {
		t.Fatalf("grants after the cancel: %d, want c's", len(r.granted))
	}
	if got := r.q.Snapshot(); len(got) != 1 || got[0].Tenant != "c" || got[0].InFlight != 1 || got[0].Waiting != 0 {
		t.Fatalf("snapshot %+v", got)
	}
}

// A waiter that outlives its timeout gets a *TimeoutError, leaves the
// queue, and is never granted.
func TestTimeout(t *testing.T) {
	r := newRecorder(t, Config{Timeout: 20 * time.Millisecond}, one)
	holder := r.submit("a", 0, 1)
	tk, err := r.q.Submit(Item{Tenant: "b", Band: 3, Cost: 7})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = tk.Wait(context.Background())
	var te *TimeoutError
	if !errors.As(err, &te) || te.Band != 3 || te.Tenant != "b" || !te.Timeout() {
		t.Fatalf("Wait: %v, want a *TimeoutError", err)
	}
	if waited := time.Since(begin); waited < 15*time.Millisecond {
		t.Fatalf("timed out after %v, before its 20ms", waited)
	}
	r.q.Finish(holder, 1)
	if s := r.q.Stats(); s.Waiting != 0 || s.InFlight != 0 || s.TimedOut != 1 || len(r.granted) != 1 {
		t.Fatalf("after the timeout: %+v, %d grants", s, len(r.granted))
	}
}

// When a grant races with the caller giving up, the error wins and the
// capacity comes back: what callers hold always equals what the queue
// counts in flight.
func TestGrantRacesCancel(t *testing.T) {
	q, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	q.SetLimits(one)
	for i := range 300 {
		holder, err := q.Enqueue(context.Background(), Item{Tenant: "a", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w, err := q.Submit(Item{Tenant: "b", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- w.Wait(ctx) }()
		var wg sync.WaitGroup
		wg.Go(cancel)
		wg.Go(func() { q.Finish(holder, 1) })
		wg.Wait()
		err = <-errc
		held := 0
		if err == nil {
			held = 1
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
		if s := q.Stats(); s.InFlight != held || s.Waiting != 0 {
			t.Fatalf("round %d: Wait returned %v but the queue has %d in flight, %d waiting", i, err, s.InFlight, s.Waiting)
		}
		if held == 1 {
			q.Finish(w, 1)
		}
	}
}

func TestClose(t *testing.T) {
	r := newRecorder(t, Config{}, one)
	holder := r.submit("a", 0, 1)
	w := r.submit("b", 0, 1)
	r.q.Close()
	if err := w.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter of a closed queue: %v", err)
	}
	if _, err := r.q.Submit(Item{Tenant: "c"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit to a closed queue: %v", err)
	}
	r.q.Finish(holder, 1)
	if s := r.q.Stats(); s.InFlight != 0 || s.Closed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Update changes weights in place: waiting requests keep their place,
// later tags use the new weights.
func TestUpdateInPlace(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1}, one)
	r.submit("warm", 0, 1)
	for range 100 {
		r.submit("a", 0, 100)
		r.submit("b", 0, 100)
	}
	if err := r.q.Update(Config{MaxWaiting: -1, Weights: map[string]float64{"a": 0}}); err == nil {
		t.Fatal("a zero weight accepted")
	}
	if err := r.q.Update(Config{MaxWaiting: -1, Weights: map[string]float64{"a": 3}}); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for range 81 {
		count[r.step(-1).item.Tenant]++
	}
	if count["a"] < 58 || count["a"] > 62 {
		t.Fatalf("after weights 3:1, grants %v, want about 60 a and 20 b", count)
	}
	if s := r.q.Stats(); s.Waiting != 200-81 {
		t.Fatalf("%d waiting, want %d", s.Waiting, 200-81)
	}
}

func TestSnapshot(t *testing.T) {
	r := newRecorder(t, Config{}, one)
	r.submit("z", 0, 5)
	r.submit("a", 0, 10)
	r.submit("a", 0, 20)
	r.submit("b", 2, 30)
	got := fmt.Sprintf("%+v", r.q.Snapshot())
	var want []TenantState
	want = append(want,
		TenantState{Band: 2, Tenant: "b", Waiting: 1, WaitingTokens: 30},
		TenantState{Band: 0, Tenant: "a", Waiting: 2, WaitingTokens: 30},
		TenantState{Band: 0, Tenant: "z", InFlight: 1, InFlightTokens: 5},
	)
	snap := r.q.Snapshot()
	for i := range snap {
		if snap[i].Waiting > 0 && snap[i].OldestWait < 0 {
			t.Fatalf("negative wait %+v", snap[i])
		}
		snap[i].OldestWait = 0
	}
	if fmt.Sprint(snap) != fmt.Sprint(want) {
		t.Fatalf("snapshot\n got %s\nwant %+v", got, want)
	}
}

// The queue starts no goroutine, and its waiters leave with their
// callers whatever ends them.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	q, err := New(Config{MaxWaiting: 50, Timeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	q.SetLimits(Limits{Requests: 4, Tokens: -1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 200 {
		wg.Go(func() {
			c := ctx
			if i%3 == 0 {
				c = context.Background()
			}
			tk, err := q.Enqueue(c, Item{Tenant: fmt.Sprint(i % 7), Band: i % 2, Cost: int64(i)})
			var kind string
			switch {
			case err == nil:
				kind = "granted"
				q.Finish(tk, int64(i/2))
			case errors.Is(err, ErrFull):
				kind = "full"
			case errors.Is(err, context.Canceled):
				kind = "canceled"
			default:
				var te *TimeoutError
				if !errors.As(err, &te) {
					t.Errorf("Enqueue: %v", err)
				}
				kind = "timeout"
			}
			mu.Lock()
			outcomes[kind]++
			mu.Unlock()
		})
	}
	cancel()
	wg.Wait()
	if s := q.Stats(); s.Waiting != 0 || s.InFlight != 0 {
		t.Fatalf("after every caller returned: %+v", s)
	}
	// Each request ends once: finished, refused, or given up.
	if s := q.Stats(); s.Submitted != s.Finished+s.Rejected+s.PushedOut+s.Canceled+s.TimedOut {
		t.Fatalf("counters do not add up: %+v (outcomes %v)", s, outcomes)
	}
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// A grant that lands as its caller gives up is given back: the error
// wins, nothing stays in flight, and the next waiter gets the capacity.
func TestAbandonAfterGrant(t *testing.T) {
	r := newRecorder(t, Config{}, one)
	holder := r.submit("a", 0, 1)
	w := r.submit("b", 0, 10)
	next := r.submit("c", 0, 1)
	r.q.Finish(holder, 1)
	if !isReady(w) {
		t.Fatal("w not granted")
	}
	// The caller saw its ctx end before the grant.
	if err := w.abandon(context.Canceled, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandon: %v", err)
	}
	if err := w.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after abandon: %v", err)
	}
	if !isReady(next) {
		t.Fatal("the capacity w gave back did not go to the next waiter")
	}
	r.q.Finish(w, 10) // ignored
	if s := r.q.Stats(); s.InFlight != 1 || s.Canceled != 1 {
		t.Fatalf("stats %+v", s)
	}
	if w.Item().Cost != 10 || w.Waited() <= 0 || holder.Waited() != 0 {
		t.Fatalf("item %+v, waited %v, holder waited %v", w.Item(), w.Waited(), holder.Waited())
	}
}

// Tenants that come and go leave nothing behind while the band is busy.
func TestIdleTenantsForgotten(t *testing.T) {
	r := newRecorder(t, Config{}, Unlimited)
	r.submit("always", 0, 1) // keeps the band busy
	for i := range 10000 {
		tk := r.submit(fmt.Sprint("once", i), 0, int64(1+i%100))
		r.q.Finish(tk, -1)
	}
	if n := len(r.q.bands[0].flows); n != 1 {
		t.Fatalf("%d tenants remembered, want 1", n)
	}
}

func TestErrorMessages(t *testing.T) {
	for _, err := range []error{
		&FullError{Size: 3}, &FullError{Size: 3, PushedOut: true},
		&TimeoutError{Waited: time.Second, Band: 2},
	} {
		if err.Error() == "" {
			t.Errorf("%T without a message", err)
		}
	}
	if !errors.Is(&FullError{}, ErrFull) || errors.Is(&FullError{}, ErrClosed) {
		t.Fatal("errors.Is of a FullError")
	}
}
