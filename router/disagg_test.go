package router

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// Conditional disaggregation: a prefill engine that already has
// max_prefill_queue calls in flight gets no more; the decode engine
// prefills the request itself, with the same text. With the option off,
// every request is disaggregated however busy the prefill engine is.
func TestBusyPrefillEngineSharesItsWork(t *testing.T) {
	for _, tc := range []struct {
		opt       string
		maxQueue  int
		wantLocal bool
	}{
		{"max_prefill_queue 1", 1, true},
		{"max_prefill_queue off", -1, false},
	} {
		t.Run(tc.opt, func(t *testing.T) {
			s := startCore(t, 2, Config{Mode: ModeDisagg, MaxPrefillQueue: tc.maxQueue}, nil)
			pre := s.fleet.upstreams[s.r.roles[engine.RolePrefill][0]]
			m := sharedMetrics()
			busy := m.localPrefills.WithLabelValues("prefill_busy")
			body := greedy("the quick brown fox jumps over the lazy dog", 12)
			want := s.complete(s.engines[1], body)

			// An idle prefill engine takes the prefill.
			local, moved := testutil.ToFloat64(busy), testutil.ToFloat64(m.kvBytes)
			if got := s.complete(s.base, body); got != want {
				t.Fatalf("idle prefill engine: %q, want %q", got, want)
			}
			if testutil.ToFloat64(busy) != local || testutil.ToFloat64(m.kvBytes) == moved {
				t.Fatal("an idle prefill engine was passed over")
			}

			// One call in flight there already: busy at max_prefill_queue 1.
			release, _ := pre.hold()
			defer release()
			local, moved = testutil.ToFloat64(busy), testutil.ToFloat64(m.kvBytes)
			if text, done := s.stream(body); text != want || !done {
				t.Fatalf("busy prefill engine: %q done=%v, want %q", text, done, want)
			}
			gotLocal := testutil.ToFloat64(busy) == local+1
			gotRemote := testutil.ToFloat64(m.kvBytes) > moved
			if gotLocal != tc.wantLocal || gotRemote == tc.wantLocal {
				t.Fatalf("busy prefill engine: prefilled locally %v, KV moved %v; want local %v", gotLocal, gotRemote, tc.wantLocal)
			}
		})
	}
}
