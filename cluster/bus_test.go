package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// inbox collects a subscriber's messages.
type inbox struct {
	mu   sync.Mutex
	msgs []string
	got  chan struct{} // a batch arrived
}

func newInbox() *inbox { return &inbox{got: make(chan struct{}, 1)} }

func (b *inbox) take(msgs [][]byte) {
	b.mu.Lock()
	for _, m := range msgs {
		b.msgs = append(b.msgs, string(m))
	}
	b.mu.Unlock()
	select {
	case b.got <- struct{}{}:
	default:
	}
}

func (b *inbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

// reach publishes probes from c on channel until in has one: the
// subscription is in place (a SUBSCRIBE is not acknowledged to the caller).
func reach(t *testing.T, c *Conn, channel string, in *inbox) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c.Publish(channel, []byte("probe"))
		select {
		case <-in.got:
			return
		case <-tick.C:
		case <-deadline:
			t.Fatal("the subscriber never heard a probe")
		}
	}
}

// A replica's messages reach the other replica's subscriber, all of them,
// in order, in batches; never its own.
func TestBusCarriesMessagesToTheOthers(t *testing.T) {
	srv := redistest.Start(t)
	a := newTestConn(t, srv.Addr(), zap.NewNop())
	b := newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, a, true, 5*time.Second)
	waitUp(t, b, true, 5*time.Second)
	ch := a.Key("m", "prefix")
	atA, atB := newInbox(), newInbox()
	a.Subscribe(ch, atA.take)
	b.Subscribe(ch, atB.take)
	reach(t, b, ch, atA)
	reach(t, a, ch, atB)
	before := len(atA.all())
	for i := range 200 {
		if !b.Publish(ch, []byte(fmt.Sprintf("m%03d", i))) {
			t.Fatalf("message %d dropped", i)
		}
	}
	b.Publish(ch, []byte("end"))
	deadline := time.After(10 * time.Second)
	for !slices.Contains(atA.all(), "end") {
		select {
		case <-atA.got:
		case <-deadline:
			t.Fatal("the messages never all arrived")
		}
	}
	var got []string
	for _, m := range atA.all()[before:] {
		if m != "probe" && m != "end" {
			got = append(got, m)
		}
	}
	if len(got) != 200 || got[0] != "m000" || got[199] != "m199" || !slices.IsSorted(got) {
		t.Fatalf("received %d messages: %v", len(got), got)
	}
	for _, m := range atB.all() {
		if m != "probe" {
			t.Fatalf("a replica heard its own message %q", m)
		}
	}
}

// Redis restarted: the subscription comes back by itself.
func TestBusResubscribesAfterRedisRestarts(t *testing.T) {
	srv := redistest.Start(t)
	a := newTestConn(t, srv.Addr(), zap.NewNop())
	b := newTestConn(t, srv.Addr(), zap.NewNop())
	waitUp(t, a, true, 5*time.Second)
	ch := a.Key("m", "prefix")
	in := newInbox()
	a.Subscribe(ch, in.take)
	reach(t, b, ch, in)
	srv.Kill()
	waitUp(t, b, false, 5*time.Second)
	if b.Publish(ch, []byte("lost")) {
		t.Fatal("a message was queued while Redis is away")
	}
	srv.Restart()
	waitUp(t, b, true, 10*time.Second)
	reach(t, b, ch, in)
}

func TestFrameSplits(t *testing.T) {
	var f frame
	f.reset(7)
	f.add([]byte("ab"))
	f.add(nil)
	f.add([]byte("c"))
	msgs, id, err := splitFrame(f.buf)
	if err != nil || id != 7 || len(msgs) != 3 || string(msgs[0]) != "ab" || len(msgs[1]) != 0 || string(msgs[2]) != "c" {
		t.Fatalf("split: %q %d %v", msgs, id, err)
	}
	for _, bad := range [][]byte{nil, f.buf[:8], append([]byte{9}, f.buf[1:]...), f.buf[:len(f.buf)-1]} {
		if _, _, err := splitFrame(bad); err == nil {
			t.Fatalf("split %x", bad)
		}
	}
}
