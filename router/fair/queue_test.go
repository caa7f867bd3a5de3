package fair

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

var one = Limits{Requests: 1, Tokens: -1}

// A tenant that floods the queue does not hold back another's request
// for more than about one of its own.
func TestFloodDoesNotStarve(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1}, one)
	r.submit("a", 0, 128) // in flight
	for range 1000 {
		r.submit("a", 0, 128)
	}
	b := r.submit("b", 0, 128)
	if isReady(b) {
		t.Fatal("b was granted with no capacity")
	}
	for i := 1; ; i++ {
		if g := r.step(-1); g == b {
			if i > 2 {
				t.Fatalf("b was granted after %d grants behind a's 1000 requests, want at most 2", i)
			}
			break
		}
		if i > 1000 {
			t.Fatal("b never granted")
		}
	}
	// A tenant that comes back later is not held behind the flood either.
	c := r.submit("c", 0, 4096)
	for i := 1; ; i++ {
		if g := r.step(-1); g == c {
			if i > 2 {
				t.Fatalf("c was granted after %d grants", i)
			}
			break
		}
	}
}

// While two tenants of weights 2 and 1 wait, their service in tokens
// keeps the ratio within SFQ's bound: the difference of normalised
// service is at most one largest request of each.
func TestWeightsShareTokens(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1, Weights: map[string]float64{"a": 2}}, one)
	rng := rand.New(rand.NewPCG(1, 2))
	const maxCost = 500
	r.submit("warm", 0, 1)
	for range 400 {
		r.submit("a", 0, 10+rng.Int64N(maxCost-10))
		r.submit("b", 0, 10+rng.Int64N(maxCost-10))
	}
	served := map[string]int64{}
	left := map[string]int{"a": 400, "b": 400}
	for range 500 {
		g := r.step(-1)
		served[g.item.Tenant] += g.item.Cost
		left[g.item.Tenant]--
		if left["a"] == 0 || left["b"] == 0 {
			t.Fatal("a tenant ran out of waiters: the test's backlog is too small")
		}
		// SFQ: |Wa/wa - Wb/wb| <= maxA/wa + maxB/wb (Goyal et al., theorem 1).
		diff := float64(served["a"])/2 - float64(served["b"])
		if bound := float64(maxCost)/2 + maxCost; diff > bound || diff < -bound {
			t.Fatalf("served a %d, b %d tokens: normalised difference %.0f over the bound %.0f", served["a"], served["b"], diff, bound)
		}
	}
	ratio := float64(served["a"]) / float64(served["b"])
	if ratio < 1.9 || ratio > 2.1 {
		t.Fatalf("a/b tokens served %.3f, want 2 ± 5%%", ratio)
	}
}

// Equal weights share tokens, not requests: a tenant of short requests
// gets more of them.
func TestFairByTokens(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1}, one)
	r.submit("warm", 0, 1)
	for range 200 {
		r.submit("long", 0, 1000)
	}
	for range 2000 {
		r.submit("short", 0, 100)
	}
	count := map[string]int{}
	for range 220 {
		count[r.step(-1).item.Tenant]++
	}
	if count["long"] < 19 || count["long"] > 21 || count["short"] < 199 || count["short"] > 201 {
		t.Fatalf("grants %v, want about 20 long and 200 short (equal tokens)", count)
	}
}

// A higher band is always served first, whatever the tags of the lower.
func TestBandsStrictlyFirst(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1}, one)
	r.submit("x", 0, 1)
	for range 10 {
		r.submit("a", 0, 1)
	}
	for range 5 {
		r.submit("b", 1, 10000)
	}
	for range 5 {
		r.submit("c", 2, 10000)
	}
	r.submit("a", 1, 1) // a's request in band 1 is fair within band 1
	var order []string
	for range 21 {
		g := r.step(-1)
		order = append(order, fmt.Sprintf("%s%d", g.item.Tenant, g.item.Band))
	}
	want := "[c2 c2 c2 c2 c2 b1 a1 b1 b1 b1 b1 a0 a0 a0 a0 a0 a0 a0 a0 a0 a0]"
	if got := fmt.Sprint(order); got != want {
		t.Fatalf("order of grants\n got %s\nwant %s", got, want)
	}
}

// Each tenant's requests are granted in the order they were submitted,
// whatever their costs.
func TestFIFOPerTenant(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: -1, Weights: map[string]float64{"t1": 3, "t2": 0.5}}, one)
	rng := rand.New(rand.NewPCG(3, 4))
	r.submit("warm", 0, 1)
	next := map[string]int{}
	id := map[*Ticket]int{}
	n := 0
	for range 600 {
		tenant := fmt.Sprintf("t%d", rng.IntN(4))
		tk := r.submit(tenant, 0, 1+rng.Int64N(2000))
		id[tk] = next[tenant]
		next[tenant]++
		n++
	}
	seen := map[string]int{}
	for range n {
		// Real costs differ from the estimates, which moves tags.
		g := r.step(rng.Int64N(3000))
		if g == nil {
			t.Fatal("a finish granted nothing with requests waiting")
		}
		tenant := g.item.Tenant
		if id[g] != seen[tenant] {
			t.Fatalf("%s's request %d granted when %d was next", tenant, id[g], seen[tenant])
		}
		seen[tenant]++
	}
}

// Finish corrects the tenant's share with the real cost: a request that
// generated far less than its max_tokens does not count against the next.
func TestFinishCorrectsShare(t *testing.T) {
	for _, tc := range []struct {
		real int64
		want string
	}{{100, "[b a b b]"}, {-1, "[b b b a]"}} {
		r := newRecorder(t, Config{MaxWaiting: -1}, one)
		a1 := r.submit("a", 0, 1000) // granted, in flight
		r.submit("a", 0, 100)
		for range 3 {
			r.submit("b", 0, 100)
		}
		real := tc.real
		if real < 0 {
			real = a1.item.Cost
		}
		var order []string
		order = append(order, r.step(real).item.Tenant)
		for range 3 {
			order = append(order, r.step(-1).item.Tenant)
		}
		if got := fmt.Sprint(order); got != tc.want {
			t.Errorf("a's first request cost %d: order %s, want %s", real, got, tc.want)
		}
	}
}

func TestTokenLimit(t *testing.T) {
	r := newRecorder(t, Config{}, Limits{Requests: -1, Tokens: 1000})
	a := r.submit("a", 0, 600)
	b := r.submit("b", 0, 600)
	if !isReady(a) || isReady(b) {
		t.Fatalf("granted a %v b %v, want a only: 1200 tokens over a limit of 1000", isReady(a), isReady(b))
	}
	r.q.Finish(a, 600)
	if !isReady(b) {
		t.Fatal("b not granted once a finished")
	}
	big := r.submit("c", 0, 5000)
	if isReady(big) {
		t.Fatal("a request over the limit granted while another is in flight")
	}
	r.q.Finish(b, 600)
	if !isReady(big) {
		t.Fatal("a request over the limit not granted alone")
	}
}

// Borrow grants a tenant with nothing in flight beyond the request
// limit, one request at a time, and no one else.
func TestBorrowServesAnIdleTenant(t *testing.T) {
	r := newRecorder(t, Config{}, Limits{Requests: 1, Tokens: -1, Borrow: 1})
	a1 := r.submit("a", 0, 10)
	a2 := r.submit("a", 0, 10)
	if !isReady(a1) || isReady(a2) {
		t.Fatalf("granted a1 %v a2 %v, want a1 only", isReady(a1), isReady(a2))
	}
	b1 := r.submit("b", 0, 10)
	b2 := r.submit("b", 0, 10)
	if !isReady(b1) || isReady(b2) || isReady(a2) {
		t.Fatalf("granted b1 %v b2 %v a2 %v, want b1 only, borrowed", isReady(b1), isReady(b2), isReady(a2))
	}
	c := r.submit("c", 0, 10)
	if isReady(c) {
		t.Fatal("a second request borrowed past the limit")
	}
	r.q.Finish(a1, 10)
	r.q.Finish(b1, 10)
	// a2 takes the slot; one of b2 and c, tenants with none in flight,
	// borrows again.
	if !isReady(a2) || isReady(b2) == isReady(c) || r.q.Stats().InFlight != 2 {
		t.Fatalf("after a1 and b1: a2 %v b2 %v c %v, %d in flight", isReady(a2), isReady(b2), isReady(c), r.q.Stats().InFlight)
	}

	plain := newRecorder(t, Config{}, Limits{Requests: 1, Tokens: -1})
	plain.submit("a", 0, 10)
	if b := plain.submit("b", 0, 10); isReady(b) {
		t.Fatal("granted past the limit without Borrow")
	}
}

func TestSetLimitsAndRelease(t *testing.T) {
	r := newRecorder(t, Config{}, Limits{Requests: 0, Tokens: -1})
	var tks []*Ticket
	for i := range 6 {
		tks = append(tks, r.submit(fmt.Sprint(i), 0, 10))
	}
	if len(r.granted) != 0 {
		t.Fatalf("%d granted at capacity 0", len(r.granted))
	}
	r.q.SetLimits(Limits{Requests: 2, Tokens: -1})
	if len(r.granted) != 2 {
		t.Fatalf("%d granted at capacity 2", len(r.granted))
	}
	if n := r.q.Release(3); n != 3 || len(r.granted) != 5 {
		t.Fatalf("Release(3) granted %d, %d in all", n, len(r.granted))
	}
	if n := r.q.Release(3); n != 1 {
		t.Fatalf("Release(3) with one waiting granted %d", n)
	}
	s := r.q.Stats()
	if s.InFlight != 6 || s.Waiting != 0 || s.Released != 4 || s.Granted != 2 {
		t.Fatalf("stats %+v", s)
	}
	for _, tk := range tks {
		r.q.Finish(tk, -1)
		r.q.Finish(tk, -1) // twice is ignored
	}
	if s := r.q.Stats(); s.InFlight != 0 || s.InFlightTokens != 0 || s.Finished != 6 {
		t.Fatalf("after finishing all: %+v", s)
	}
	if len(r.q.bands) != 0 {
		t.Fatalf("%d bands kept with nothing waiting or in flight", len(r.q.bands))
	}
}

// A full queue refuses the tenant with the most waiters, and makes room
// for others by pushing out that tenant's newest.
func TestFullPushesOutLongest(t *testing.T) {
	r := newRecorder(t, Config{MaxWaiting: 3}, one)
	r.submit("a", 0, 1)
	a := []*Ticket{r.submit("a", 0, 1), r.submit("a", 0, 1), r.submit("a", 0, 1)}
	_, err := r.q.Submit(Item{Tenant: "a", Cost: 1})
	var full *FullError
	if !errors.As(err, &full) || full.PushedOut || !errors.Is(err, ErrFull) {
		t.Fatalf("a's fourth waiter: %v, want a refusal", err)
	}
	r.submit("b", 0, 1)
	if !isReady(a[2]) || isReady(a[1]) {
		t.Fatal("b's arrival did not push out a's newest waiter")
	}
	if err := a[2].Wait(context.Background()); !errors.As(err, &full) || !full.PushedOut {
		t.Fatalf("pushed out waiter: %v", err)
	}
	// Two each: b's next arrival is refused, a band 1 arrival pushes out
	// a band 0 waiter.
	if _, err := r.q.Submit(Item{Tenant: "b", Cost: 1}); !errors.Is(err, ErrFull) {
		t.Fatalf("b's arrival with two waiting as a has: %v, want a refusal", err)
	}
	r.submit("c", 1, 1)
	if s := r.q.Stats(); s.Waiting != 3 || s.PushedOut != 2 || s.Rejected != 2 {
		t.Fatalf("stats %+v", s)
	}
	var order []string
	for range 3 {
		order = append(order, r.step(-1).item.Tenant)
	}
	if order[0] != "c" {
		t.Fatalf("order %v: c's band 1 request not first", order)
	}
}
