package router

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// When the decode engine has no room for a request, a prefill engine
// with room serves it whole, with the same text; when neither has room,
// the request goes to the decode engine all the same, and the wait is
// counted. With room on the decode engine, nothing changes.
func TestShortDecodeServedByPrefillEngine(t *testing.T) {
	s := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	pi, di := s.r.roles[engine.RolePrefill][0], s.r.roles[engine.RoleDecode][0]
	pre, dec := s.fleet.upstreams[pi], s.fleet.upstreams[di]
	m := sharedMetrics()
	short := m.localPrefills.WithLabelValues(shortDecode)
	body := greedy("the quick brown fox jumps over the lazy dog", 12)
	want := s.complete(s.engines[1], body)
	// A report dated ahead is neither polled over nor stale while the
	// test runs; only this engine's own answers would replace it.
	full := func(u *Upstream, free int) {
		u.load.Store(&engineLoad{EngineLoad: protocol.EngineLoad{PagesTotal: 64, PagesFree: free}, at: time.Now().Add(time.Hour)})
	}
	// pre and dec: the tokens each engine decoded (the first comes with the
	// prefill).
	type counts struct{ short, waits, pre, dec float64 }
	now := func() counts {
		return counts{testutil.ToFloat64(short), testutil.ToFloat64(m.capacityWaits),
			engineMetrics(t, s.engines[pi])["decode_tokens"], engineMetrics(t, s.engines[di])["decode_tokens"]}
	}
	for _, tc := range []struct {
		name             string
		decFree, preFree int
		want             counts // what the request adds
	}{
		{"decode room", 64, 64, counts{dec: 11}},
		{"decode full", 0, 64, counts{short: 1, pre: 11}},
		{"every engine full", 0, 1, counts{waits: 1, dec: 11}},
	} {
		full(dec, tc.decFree)
		full(pre, tc.preFree)
		before := now()
		if text, done := s.stream(body); text != want || !done {
			t.Fatalf("%s: %q done=%v, want %q", tc.name, text, done, want)
		}
		after := now()
		got := counts{after.short - before.short, after.waits - before.waits, after.pre - before.pre, after.dec - before.dec}
		if got != tc.want {
			t.Errorf("%s: decode_short, capacity waits, tokens the prefill and decode engines generated %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
