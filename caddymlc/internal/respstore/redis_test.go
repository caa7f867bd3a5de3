package respstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/router/responsestore"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// newTestConn is a started connection to the Redis at addr, closed with
// the test.
func newTestConn(t *testing.T, addr string, log *zap.Logger) *cluster.Conn {
	t.Helper()
	c := cluster.New(cluster.Options{Addr: addr, Logger: log, Prefix: "test-" + t.Name()})
	t.Cleanup(func() { _ = c.Close() })
	c.Start()
	return c
}

// waitUp waits until c's view of Redis is want.
func waitUp(t *testing.T, c *cluster.Conn, want bool, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		up, changed := c.Watch()
		if up == want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the connection did not become up=%v within %v", want, within)
		}
	}
}

// Two replicas' stores on one Redis: what one stores the other reads and
// deletes; another tenant finds nothing; the key names neither the
// tenant nor the id, and expires after the TTL (Redis's own expiry).
func TestRedisSharedByReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := newTestConn(t, srv.Addr(), zap.NewNop())
	b := newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, a, true, 5*time.Second)
	waitUp(t, b, true, 5*time.Second)
	const ttl = 90 * time.Minute
	sa, sb := NewRedis(a, ttl), NewRedis(b, ttl)

	const tenant, id = "tenant:with spaces:and colons", "resp_0123"
	if err := sa.Put(ctx, tenant, id, []byte(`{"r":1}`)); err != nil {
		t.Fatal(err)
	}
	got, found, err := sb.Get(ctx, tenant, id)
	if err != nil || !found || string(got) != `{"r":1}` {
		t.Fatalf("the other replica read %q, %v, %v", got, found, err)
	}
	if _, found, err := sb.Get(ctx, "another tenant", id); err != nil || found {
		t.Fatalf("another tenant: found %v, %v", found, err)
	}
	if deleted, err := sb.Delete(ctx, "another tenant", id); err != nil || deleted {
		t.Fatalf("another tenant deleted it: %v, %v", deleted, err)
	}

	keys, err := a.Client().Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], a.Key("responses")+":") || strings.Contains(keys[0], "tenant") || strings.Contains(keys[0], id) {
		t.Fatalf("keys %q: want one, <prefix>:responses:<hashes>", keys)
	}
	if pttl := a.Client().PTTL(ctx, keys[0]).Val(); pttl <= ttl-time.Minute || pttl > ttl {
		t.Fatalf("the key expires in %v, want %v", pttl, ttl)
	}

	// A second Put replaces the record, with a TTL set anew.
	sa.SetTTL(time.Hour)
	if err := sa.Put(ctx, tenant, id, []byte(`{"r":2}`)); err != nil {
		t.Fatal(err)
	}
	if pttl := a.Client().PTTL(ctx, keys[0]).Val(); pttl > time.Hour || pttl <= 59*time.Minute {
		t.Fatalf("after SetTTL the key expires in %v, want an hour", pttl)
	}
	if got, _, _ := sb.Get(ctx, tenant, id); string(got) != `{"r":2}` {
		t.Fatalf("read %q after the replacement", got)
	}

	if deleted, err := sb.Delete(ctx, tenant, id); err != nil || !deleted {
		t.Fatalf("delete: %v, %v", deleted, err)
	}
	if _, found, err := sa.Get(ctx, tenant, id); err != nil || found {
		t.Fatalf("read after the delete: found %v, %v", found, err)
	}
	if deleted, err := sa.Delete(ctx, tenant, id); err != nil || deleted {
		t.Fatalf("second delete: %v, %v", deleted, err)
	}
}

// While Redis is known to be away every call fails at once with
// cluster.ErrDown, which is the responsestore.ErrUnavailable; the first
// call that finds it gone fails within its deadline with them too, and
// takes the connection down.
func TestRedisAway(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, c, true, 5*time.Second)
	s := NewRedis(c, 0)
	if err := s.Put(ctx, "t", "id", []byte("x")); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	begin := time.Now()
	_, _, err := s.Get(ctx, "t", "id")
	if !errors.Is(err, cluster.ErrDown) || !errors.Is(err, responsestore.ErrUnavailable) {
		t.Fatalf("Get with Redis killed: %v, want ErrDown and ErrStoreUnavailable", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("the call took %v", took)
	}
	waitUp(t, c, false, 5*time.Second)
	begin = time.Now()
	for _, err := range []error{
		s.Put(ctx, "t", "id", []byte("x")),
		func() error { _, _, err := s.Get(ctx, "t", "id"); return err }(),
		func() error { _, err := s.Delete(ctx, "t", "id"); return err }(),
	} {
		if !errors.Is(err, cluster.ErrDown) || !errors.Is(err, responsestore.ErrUnavailable) {
			t.Fatalf("with Redis known away: %v, want ErrDown and ErrStoreUnavailable", err)
		}
	}
	if took := time.Since(begin); took > 100*time.Millisecond {
		t.Fatalf("three calls with Redis known away took %v: not at once", took)
	}
}
