package caddymlc

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The router's metrics count requests, tokens and retries, and the
// in-flight gauge comes back to 0.
func TestMetricsCount(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	m := sharedMetrics()
	ok := m.requests.WithLabelValues(ModeDisagg, "ok")
	bad := m.requests.WithLabelValues(ModeDisagg, "client_error")
	okBefore, badBefore, tokBefore := testutil.ToFloat64(ok), testutil.ToFloat64(bad), testutil.ToFloat64(m.tokens)
	if _, err := s.stream(context.Background(), s.base, greedy("count me", 5)); err != nil {
		t.Fatal(err)
	}
	post(t, s.base+"/v1/completions", map[string]any{"prompt": ""}, 400)
	if d := testutil.ToFloat64(ok) - okBefore; d != 1 {
		t.Fatalf("ok requests +%v, want +1", d)
	}
	if d := testutil.ToFloat64(bad) - badBefore; d != 1 {
		t.Fatalf("client errors +%v, want +1", d)
	}
	if d := testutil.ToFloat64(m.tokens) - tokBefore; d != 5 {
		t.Fatalf("tokens +%v, want +5", d)
	}
	for _, e := range statusOfLive()[0].Engines {
		if g := testutil.ToFloat64(m.inflight.WithLabelValues(e.Addr)); g != 0 {
			t.Fatalf("in-flight gauge of %s is %v", e.Addr, g)
		}
	}
}
