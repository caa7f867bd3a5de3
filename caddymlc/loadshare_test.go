package caddymlc

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// waitCapacity waits until the running router's gate lets want requests
// through to the engines.
func waitCapacity(t *testing.T, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := liveNow().lifecycle.Statuses()
		if len(st) == 1 && st[0].Gate.Capacity == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the gate's capacity is not %d: %+v", why, want, st)
		}
		time.Sleep(10 * time.Millisecond) // the word crosses Redis: polled
	}
}

// A replica's gate leaves the engines' batch to what another replica says
// it runs on them, at least its fair share; it owns the whole batch again
// when the other stops, or when Redis is gone.
func TestClusterGateLeavesOthersTheirRequests(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 2)
	eng := fmt.Sprintf("127.0.0.1:%d", ports[0])
	startEngineProc(t, eng, nil)
	loadCaddyfile(t, replicaConfig("off", srv.Addr(), ports[1], "\t\tmax_inflight 6\n", eng))
	waitClusterUp(t, liveCluster(t))
	waitCapacity(t, 6, "alone")

	// Another replica, as its Conn: it runs 2, then 5 requests on the engine.
	other := cluster.New(cluster.Options{Addr: srv.Addr(), Logger: zap.NewNop()})
	t.Cleanup(func() { _ = other.Close() })
	other.Start()
	waitClusterUp(t, other)
	running := make(chan int, 1)
	running <- 2
	n := 2
	stop := other.ShareCount(other.Key("tiny", "inflight"), func() int {
		select {
		case n = <-running:
		default:
		}
		return n
	}, func(cluster.Peers) {})
	defer stop()
	waitCapacity(t, 4, "the other running 2")
	running <- 5
	waitCapacity(t, 3, "the other running 5: half the batch")
	stop()
	waitCapacity(t, 6, "the other gone")

	stop = other.ShareCount(other.Key("tiny", "inflight"), func() int { return 5 }, func(cluster.Peers) {})
	defer stop()
	waitCapacity(t, 3, "the other back")
	srv.Kill()
	waitCapacity(t, 6, "Redis gone")
}
