package router

import (
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

func TestCapacityLeavesTheOthersTheirs(t *testing.T) {
	for _, tc := range []struct {
		ready, batch   int
		inFlight, busy int
		want           int
	}{
		{2, 8, 0, 0, 16}, // alone: the whole batch
		{2, 8, 4, 1, 12}, // the rest
		{2, 8, 8, 1, 8},  // the rest, which is its share
		{2, 8, 16, 1, 8}, // its share: the other shrinks as its own end
		{2, 8, 30, 2, 6}, // a third, rounded up
		{2, 1, 9, 5, 2},  // one per engine
		{1, 8, 3, 1, 5},
	} {
		if got := capacity(tc.ready, tc.batch, peerLoad{tc.inFlight, tc.busy}); got != tc.want {
			t.Errorf("capacity(%d engines × %d, others %d over %d) = %d, want %d", tc.ready, tc.batch, tc.inFlight, tc.busy, got, tc.want)
		}
	}
}

// The other replicas' load sets a live gate's capacity, at once; the
// gate's own requests in flight are what Admitted tells them.
func TestPeerLoadSetsTheGate(t *testing.T) {
	const model = "peerload-test"
	q, err := fair.New(fair.Config{MaxWaiting: 16})
	if err != nil {
		t.Fatal(err)
	}
	lv := NewLive()
	r := &Router{Config: Config{Model: model}, live: lv, routerState: new(routerState)}
	r.gate = gate{live: lv, model: model, queue: q, batch: 4, ready: func() int { return 2 }, logger: zap.NewNop()}
	lv.add(r)
	r.gate.refreshLimits()
	limit := func() int { return q.Stats().Limits.Requests }
	if got := limit(); got != 8 {
		t.Fatalf("alone: capacity %d, want 8", got)
	}
	lv.SetPeerLoad(model, 3, 1)
	if got := limit(); got != 5 {
		t.Fatalf("others running 3: capacity %d, want 5", got)
	}
	lv.SetPeerLoad(model, 20, 3)
	if got := limit(); got != 2 {
		t.Fatalf("three others running 20: capacity %d, want 2", got)
	}
	lv.SetPeerLoad(model, 0, 0)
	if got := limit(); got != 8 {
		t.Fatalf("the others gone: capacity %d, want 8", got)
	}
	var tickets []*fair.Ticket
	for range 3 {
		tk, err := q.Submit(fair.Item{Tenant: "a", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	if gate, got := r.Admitted(); gate != q || got != 3 {
		t.Fatalf("Admitted = %p %d, want the gate and 3", gate, got)
	}
	for _, tk := range tickets {
		q.Finish(tk, 1)
	}
	if _, got := r.Admitted(); got != 0 {
		t.Fatalf("Admitted after they end = %d, want 0", got)
	}
}
