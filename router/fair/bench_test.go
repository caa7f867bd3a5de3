package fair

import (
	"fmt"
	"testing"
)

// BenchmarkSubmitFinish measures one request through a busy queue: 1000
// waiting across 100 tenants in two bands, 64 in flight. Each op submits
// one and finishes the oldest in flight, which grants the next.
func BenchmarkSubmitFinish(b *testing.B) {
	q, err := New(Config{MaxWaiting: -1})
	if err != nil {
		b.Fatal(err)
	}
	var inFlight []*Ticket
	q.onGrant = func(t *Ticket) { inFlight = append(inFlight, t) }
	q.SetLimits(Limits{Requests: 64, Tokens: -1})
	tenants := make([]string, 100)
	for i := range tenants {
		tenants[i] = fmt.Sprint("tenant", i)
	}
	submit := func(i int) {
		if _, err := q.Submit(Item{Tenant: tenants[i%len(tenants)], Band: i % 2, Cost: int64(100 + i%900)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1064 {
		submit(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		submit(i)
		t := inFlight[0]
		inFlight = inFlight[1:]
		q.Finish(t, t.item.Cost/2)
	}
}
