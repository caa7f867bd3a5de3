package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The prefix index's view is counted: a prompt's first routing finds
// nothing in the engine's index, the same prompt again finds its full
// pages there; a policy that does not read the index counts nothing.
func TestPrefixHitTokensAreCounted(t *testing.T) {
	const pages, extra = 3, 5
	prompt := seq(7, pages*kvPageTokens+extra)
	m := sharedMetrics()
	for _, tc := range []struct {
		policy     Policy
		counts     bool
		model, tag string
	}{{PrefixAware{}, true, "tiny-prefix-aware", "prefix_aware"}, {LeastLoaded{}, false, "tiny-least-loaded", "least_loaded"}} {
		t.Run(tc.tag, func(t *testing.T) {
			s := startCoreModel(t, tc.model, "tiny", 1, Config{Mode: ModeWhole}, tc.policy)
			addr := strings.TrimPrefix(s.engines[0], "http://")
			promptTokens := func() float64 { return testutil.ToFloat64(m.prefixPrompt.WithLabelValues(tc.model, addr)) }
			hitTokens := func() float64 { return testutil.ToFloat64(m.prefixHit.WithLabelValues(tc.model, addr)) }
			var got [][2]float64
			for range 2 {
				p0, h0 := promptTokens(), hitTokens()
				s.complete(s.base, greedy(prompt, 4))
				got = append(got, [2]float64{promptTokens() - p0, hitTokens() - h0})
			}
			want := [][2]float64{{0, 0}, {0, 0}}
			if tc.counts {
				n := float64(len(prompt))
				want = [][2]float64{{n, 0}, {n, pages * kvPageTokens}}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("(prompt, hit) tokens counted per request: %v, want %v", got, want)
			}
		})
	}
}
