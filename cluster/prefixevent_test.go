package cluster

import (
	"bytes"
	"slices"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/router"
)

func TestPrefixEventWireForm(t *testing.T) {
	ev := router.PrefixEvent{Kind: router.PrefixFinished, Engine: "[::1]:8081", Chain: []uint64{1, 1 << 63, 42}, Tokens: -1, Predicted: 32}
	b := appendPrefixEvent(nil, ev)
	got, err := decodePrefixEvent(b)
	if err != nil || got.Kind != ev.Kind || got.Engine != ev.Engine || !slices.Equal(got.Chain, ev.Chain) || got.Tokens != -1 || got.Predicted != 32 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for i := range len(b) {
		if _, err := decodePrefixEvent(b[:i]); err == nil {
			t.Fatalf("a cut event of %d bytes decoded", i)
		}
	}
	if _, err := decodePrefixEvent(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("an event with a trailing byte decoded")
	}
}

func FuzzDecodePrefixEvent(f *testing.F) {
	f.Add(appendPrefixEvent(nil, router.PrefixEvent{Kind: router.PrefixRouted, Engine: "127.0.0.1:1", Chain: []uint64{7}}))
	f.Add([]byte{3, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodePrefixEvent(b)
		if err != nil {
			return
		}
		if again := appendPrefixEvent(nil, ev); !bytes.Equal(again, b) {
			// Varints have one shortest form; a longer one is read too.
			if ev2, err := decodePrefixEvent(again); err != nil || ev2.Engine != ev.Engine || !slices.Equal(ev2.Chain, ev.Chain) {
				t.Fatalf("re-encoding %x gave %x", b, again)
			}
		}
	})
}
