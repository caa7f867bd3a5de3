package cluster

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// peersSeen collects what ShareCount hands to apply.
type peersSeen chan Peers

func (s peersSeen) apply(p Peers) {
	for { // keep the latest only
		select {
		case s <- p:
			return
		default:
			select {
			case <-s:
			default:
			}
		}
	}
}

// await waits until apply is handed want.
func (s peersSeen) await(t *testing.T, want Peers, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	var last Peers
	for {
		select {
		case p := <-s:
			if p == want {
				return
			}
			last = p
		case <-deadline:
			t.Fatalf("peers: last %+v, want %+v within %v", last, want, within)
		}
	}
}

// Each replica learns the sum of the other replicas' counts, not its
// own; once Redis is gone the others count for nothing, and they count
// again when it is back; stopping hands no peers last.
func TestShareCountSumsTheOthers(t *testing.T) {
	srv := redistest.Start(t)
	a := newTestConn(t, srv.Addr(), zap.NewNop())
	b := newTestConn(t, srv.Addr(), zap.NewNop())
	c := newTestConn(t, srv.Addr(), zap.NewNop())
	for _, conn := range []*Conn{a, b, c} {
		waitUp(t, conn, true, 5*time.Second)
	}
	ch := a.Key("m", "inflight")
	atA, atB := make(peersSeen, 1), make(peersSeen, 1)
	stopA := a.ShareCount(ch, func() int { return 3 }, atA.apply)
	defer stopA()
	stopB := b.ShareCount(ch, func() int { return 5 }, atB.apply)
	defer stopB()
	stopC := c.ShareCount(ch, func() int { return 0 }, func(Peers) {})
	defer stopC()
	atA.await(t, Peers{Sum: 5, Busy: 1}, 10*time.Second)
	atB.await(t, Peers{Sum: 3, Busy: 1}, 10*time.Second)

	srv.Kill()
	atA.await(t, Peers{}, 10*time.Second)
	srv.Restart()
	atA.await(t, Peers{Sum: 5, Busy: 1}, 30*time.Second)

	stopB()
	select {
	case p := <-atB: // stop returns after its last apply
		if p != (Peers{}) {
			t.Fatalf("after stop, apply was last handed %+v, want no peers", p)
		}
	default:
		t.Fatal("stop did not hand apply its last, empty, peers")
	}
	atA.await(t, Peers{}, 10*time.Second)
}

func TestCountWireForm(t *testing.T) {
	b := appendCount(nil, 42, 17)
	id, n, ok := decodeCount(b)
	if !ok || id != 42 || n != 17 {
		t.Fatalf("decoded %d %d %v", id, n, ok)
	}
	for _, bad := range [][]byte{nil, b[:8], append(b, 0)} {
		if _, _, ok := decodeCount(bad); ok {
			t.Errorf("%x decoded", bad)
		}
	}
}
