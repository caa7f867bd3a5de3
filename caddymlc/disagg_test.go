package caddymlc

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// liveRouter returns the one live router and its fleet.
func liveRouter(t *testing.T) (*Router, *liveFleet) {
	t.Helper()
	live.Lock()
	defer live.Unlock()
	if len(live.routers) != 1 {
		t.Fatalf("%d live routers, want 1", len(live.routers))
	}
	for r := range live.routers {
		return r, r.handle.get()
	}
	return nil, nil
}

// Conditional disaggregation: a prefill engine that already has
// max_prefill_queue calls in flight gets no more; the decode engine
// prefills the request itself, with the same text. With the option off,
// every request is disaggregated however busy the prefill engine is.
func TestBusyPrefillEngineSharesItsWork(t *testing.T) {
	for _, tc := range []struct {
		opt       string
		wantLocal bool
	}{
		{"max_prefill_queue 1", true},
		{"max_prefill_queue off", false},
	} {
		t.Run(tc.opt, func(t *testing.T) {
			s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\t"+tc.opt+"\n")
			r, lf := liveRouter(t)
			pre := lf.upstreams[r.roles[engine.RolePrefill][0]]
			m := sharedMetrics()
			busy := m.localPrefills.WithLabelValues("prefill_busy")
			body := greedy("the quick brown fox jumps over the lazy dog", 12)
			want := reference(s, s.engines[1], body)

			// An idle prefill engine takes the prefill.
			local, moved := testutil.ToFloat64(busy), testutil.ToFloat64(m.kvBytes)
			got, status, raw := s.complete(s.base, body)
			if status != 200 || got.Choices[0].Text != want {
				t.Fatalf("idle prefill engine: %d %s, want %q", status, raw, want)
			}
			if testutil.ToFloat64(busy) != local || testutil.ToFloat64(m.kvBytes) == moved {
				t.Fatal("an idle prefill engine was passed over")
			}

			// One call in flight there already: busy at max_prefill_queue 1.
			release, _ := pre.hold()
			defer release()
			local, moved = testutil.ToFloat64(busy), testutil.ToFloat64(m.kvBytes)
			st, err := s.stream(t.Context(), s.base, body)
			if err != nil || st.text != want || !st.done {
				t.Fatalf("busy prefill engine: %q done=%v err=%v, want %q", st.text, st.done, err, want)
			}
			gotLocal := testutil.ToFloat64(busy) == local+1
			gotRemote := testutil.ToFloat64(m.kvBytes) > moved
			if gotLocal != tc.wantLocal || gotRemote == tc.wantLocal {
				t.Fatalf("busy prefill engine: prefilled locally %v, KV moved %v; want local %v", gotLocal, gotRemote, tc.wantLocal)
			}
		})
	}
}
