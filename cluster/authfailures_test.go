package cluster

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// heard follows fc into a new inbox.
func heard(fc *FailedChecks) (*inbox, *Follower) {
	in := newInbox()
	return in, fc.Follow(func(addr string) { in.take([][]byte{[]byte(addr)}) })
}

// waitHeard waits until in holds addr.
func waitHeard(t *testing.T, in *inbox, addr string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !slices.Contains(in.all(), addr) {
		select {
		case <-in.got:
		case <-deadline:
			t.Fatalf("%s never heard", addr)
		}
	}
}

// Every site's limiter hears every failure: the other replica's, and
// its own replica's other sites' at once; never its own. A follower
// stopped hears no more, and the others still do.
func TestFailedChecksReachEveryFollower(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newTestConn(t, srv.Addr(), zap.NewNop()), newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, a, true, 5*time.Second)
	waitUp(t, b, true, 5*time.Second)
	fa, fb := NewFailedChecks(a), NewFailedChecks(b)
	site1, w1 := heard(fa)
	site2, w2 := heard(fa)
	other, wb := heard(fb)
	defer w1.Stop()
	defer wb.Stop()
	reach(t, b, fa.channel, site1)
	reach(t, a, fb.channel, other)

	wb.Publish("10.0.0.1")
	waitHeard(t, site1, "10.0.0.1")
	waitHeard(t, site2, "10.0.0.1")

	w1.Publish("10.0.0.2")
	if !slices.Contains(site2.all(), "10.0.0.2") {
		t.Fatal("the other site of the replica did not hear its failure at once")
	}
	waitHeard(t, other, "10.0.0.2")
	if slices.Contains(site1.all(), "10.0.0.2") {
		t.Fatal("a site heard its own failure")
	}

	w2.Stop()
	wb.Publish("10.0.0.3")
	waitHeard(t, site1, "10.0.0.3")
	if slices.Contains(site2.all(), "10.0.0.3") {
		t.Fatal("a stopped follower heard a failure")
	}
}
