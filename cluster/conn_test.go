package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// waitUp waits until c's Up is want, through Watch.
func waitUp(t *testing.T, c *Conn, want bool, within time.Duration) {
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

func newTestConn(t *testing.T, addr string, log *zap.Logger) *Conn {
	t.Helper()
	c := New(Options{Addr: addr, Logger: log, Prefix: "test-" + t.Name()})
	t.Cleanup(func() { _ = c.Close() })
	c.Start()
	return c
}

// Redis killed and restarted: the connection goes down and comes back by
// itself, the gauge follows (1, 0, 1), and each change is logged once.
func TestConnFollowsRedis(t *testing.T) {
	srv := redistest.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	c := newTestConn(t, srv.Addr(), zap.New(core))
	waitUp(t, c, true, 5*time.Second)
	if g := testutil.ToFloat64(upGauge); g != 1 {
		t.Fatalf("caddy_mlc_cluster_up = %v while Redis answers", g)
	}
	srv.Kill()
	waitUp(t, c, false, 5*time.Second)
	if g := testutil.ToFloat64(upGauge); g != 0 {
		t.Fatalf("caddy_mlc_cluster_up = %v while Redis is down", g)
	}
	srv.Restart()
	waitUp(t, c, true, 10*time.Second)
	if g := testutil.ToFloat64(upGauge); g != 1 {
		t.Fatalf("caddy_mlc_cluster_up = %v once Redis is back", g)
	}
	var ups, downs int
	for _, e := range logs.All() {
		switch e.Level {
		case zap.InfoLevel:
			ups++
		case zap.WarnLevel:
			downs++
		}
	}
	if ups != 2 || downs != 1 {
		t.Fatalf("logged %d ups and %d downs, want 2 and 1:\n%v", ups, downs, logs.All())
	}
}

// A failed call takes the replica off Redis at once; the monitor brings it
// back when Redis answers.
func TestConnFailedCallRejoins(t *testing.T) {
	srv := redistest.Start(t)
	c := newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, c, true, 5*time.Second)
	c.Failed(errors.New("a call timed out"))
	if c.Up() {
		t.Fatal("still up after a failed call")
	}
	waitUp(t, c, true, 5*time.Second)
}

// A Redis that refuses the credentials is out of reach, said once; the
// password is in no log line.
func TestConnLogsNoPassword(t *testing.T) {
	srv := redistest.Start(t)
	core, logs := observer.New(zap.DebugLevel)
	const secret = "s3cret-never-logged"
	c := New(Options{Addr: srv.Addr(), Username: "nobody", Password: secret, Logger: zap.New(core)})
	t.Cleanup(func() { _ = c.Close() })
	_, changed := c.Watch()
	c.Start()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no first verdict on Redis")
	}
	if c.Up() {
		t.Fatal("up with credentials Redis refuses")
	}
	if n := logs.FilterMessageSnippet("out of reach").Len(); n != 1 {
		t.Fatalf("%d lines say Redis is out of reach, want 1", n)
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, secret) {
			t.Fatalf("the password is in a log line: %s", line)
		}
	}
}
