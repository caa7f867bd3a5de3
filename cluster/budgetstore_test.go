package cluster

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
)

// replica is one replica's limiter on the shared Redis.
type replica struct {
	conn *Conn
	lim  *budget.Limiter
}

// newReplica connects a limiter of rules to addr as a replica of n, with
// a local fallback. timeout is the calls' deadline: the exactness tests
// give it room, so that a slow moment of a loaded machine does not send
// them to the fallback.
func newReplica(t *testing.T, addr string, n int, timeout time.Duration, now func() time.Time, rules ...budget.Rule) *replica {
	t.Helper()
	c := New(Options{Addr: addr, Prefix: "test", Timeout: timeout, Logger: zap.NewNop()})
	t.Cleanup(func() { _ = c.Close() })
	c.Start()
	waitUp(t, c, true, 5*time.Second)
	l, err := budget.New(budget.Options{Rules: rules, Store: NewBudgetStore(c), Fallback: budget.NewMemoryStore(), Replicas: n, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{conn: c, lim: l}
}

// fixedClock is a clock the replicas share, standing still.
type fixedClock struct{ t atomic.Int64 }

func (c *fixedClock) now() time.Time { return time.UnixMicro(c.t.Load()) }

func newClock() *fixedClock {
	c := &fixedClock{}
	c.t.Store(time.Now().UnixMicro())
	return c
}

// Two replicas on one Redis, racing for one tenant's budget with a clock
// that stands still (no refill): together they admit exactly the budget,
// and a refund at settlement on one replica makes room on the other.
func TestBudgetsSharedByTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	const limit, cost = 1000, 30
	clk := newClock()
	rule := budget.Rule{Tenant: "*", TokensPerMinute: limit}
	a := newReplica(t, srv.Addr(), 2, 5*time.Second, clk.now, rule)
	b := newReplica(t, srv.Addr(), 2, 5*time.Second, clk.now, rule)

	var admitted atomic.Int64
	var mu sync.Mutex
	var held []*budget.Reservation
	var wg sync.WaitGroup
	for _, r := range []*replica{a, b} {
		for range 4 {
			wg.Go(func() {
				for range 20 {
					res, d, err := r.lim.Reserve(context.Background(), "tenant-x", cost)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Tokens.Limit != limit {
						t.Errorf("decided at a limit of %d: the fallback, not Redis (up: %v)", d.Tokens.Limit, r.conn.Up())
						return
					}
					if d.Allowed {
						admitted.Add(cost)
						mu.Lock()
						held = append(held, res)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if got := admitted.Load(); got > limit || got < limit-cost {
		t.Fatalf("the two replicas admitted %d tokens of a budget of %d (requests of %d)", got, limit, cost)
	}
	// Every request cost 10 tokens of its 30: refunds on both replicas.
	for i, res := range held {
		if err := res.Settle(context.Background(), 10); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	room := limit - int64(len(held))*10
	n := int64(0)
	for {
		_, d, err := b.lim.Reserve(context.Background(), "tenant-x", cost)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
		n += cost
	}
	if n > room || n < room-cost {
		t.Fatalf("after the refunds %d tokens were admitted, want about %d", n, room)
	}

	// The key names the bucket by a hash: no tenant in any key.
	keys, err := a.conn.Client().Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "test:budget:") || strings.Contains(keys[0], "tenant-x") {
		t.Fatalf("keys %q, want one test:budget:<hash>", keys)
	}
}

// Redis killed while requests come: no Reserve or Settle fails, the
// replica decides on its own buckets at its share of the budget, the
// gauge goes to 0; Redis restarted: the replica rejoins by itself and
// decides on Redis again, the gauge back at 1.
func TestBudgetsWhileRedisIsAway(t *testing.T) {
	srv := redistest.Start(t)
	const limit = 900
	rule := budget.Rule{Tenant: "*", TokensPerMinute: limit}
	r := newReplica(t, srv.Addr(), 3, DefaultTimeout, nil, rule)
	limitOf := func() int64 {
		t.Helper()
		res, d, err := r.lim.Reserve(context.Background(), "t", 1)
		if err != nil {
			t.Fatalf("Reserve failed: %v", err)
		}
		if err := res.Settle(context.Background(), 1); err != nil {
			t.Fatalf("Settle failed: %v", err)
		}
		return d.Tokens.Limit
	}
	if l := limitOf(); l != limit {
		t.Fatalf("limit %d with Redis up, want %d", l, limit)
	}
	if g := testutil.ToFloat64(upGauge); g != 1 {
		t.Fatalf("caddy_mlc_cluster_up = %v", g)
	}

	srv.Kill()
	// Until the replica notices, requests still reach for Redis: each
	// fails within the deadline and is decided locally.
	for r.conn.Up() {
		begin := time.Now()
		limitOf()
		if took := time.Since(begin); took > time.Second {
			t.Fatalf("a request waited %v on a dead Redis", took)
		}
	}
	if l := limitOf(); l != limit/3 {
		t.Fatalf("limit %d with Redis away, want a third, %d", l, limit/3)
	}
	if g := testutil.ToFloat64(upGauge); g != 0 {
		t.Fatalf("caddy_mlc_cluster_up = %v with Redis away", g)
	}

	srv.Restart()
	waitUp(t, r.conn, true, 10*time.Second)
	if l := limitOf(); l != limit {
		t.Fatalf("limit %d after Redis came back, want %d", l, limit)
	}
	if g := testutil.ToFloat64(upGauge); g != 1 {
		t.Fatalf("caddy_mlc_cluster_up = %v after Redis came back", g)
	}
}

// An update while Redis is known to be away makes no call.
func TestBudgetStoreFailsFastWhenDown(t *testing.T) {
	c := New(Options{Addr: "127.0.0.1:1", Logger: zap.NewNop()}) // never started: never up
	t.Cleanup(func() { _ = c.Close() })
	s := NewBudgetStore(c)
	called := false
	if err := s.Update(context.Background(), "k", func(*budget.State) { called = true }); err != ErrDown {
		t.Fatalf("Update = %v, want ErrDown", err)
	}
	if called {
		t.Fatal("the update ran with Redis down")
	}
}
