package main

import (
	"testing"
	"time"
)

const exposition = `# HELP caddy_mlc_router_overhead_seconds help
# TYPE caddy_mlc_router_overhead_seconds histogram
caddy_mlc_router_overhead_seconds_bucket{mode="disagg",le="0.001"} 2
caddy_mlc_router_overhead_seconds_bucket{mode="disagg",le="0.002"} 6
caddy_mlc_router_overhead_seconds_bucket{mode="disagg",le="+Inf"} 8
caddy_mlc_router_overhead_seconds_sum{mode="disagg"} 0.02
caddy_mlc_router_overhead_seconds_count{mode="disagg"} 8
caddy_mlc_router_overhead_seconds_bucket{mode="whole",le="0.001"} 2
caddy_mlc_router_overhead_seconds_bucket{mode="whole",le="0.002"} 2
caddy_mlc_router_overhead_seconds_bucket{mode="whole",le="+Inf"} 2
caddy_mlc_router_overhead_seconds_sum{mode="whole"} 0.001
caddy_mlc_router_overhead_seconds_count{mode="whole"} 2
`

// The overhead histogram is read from Caddy's exposition, every mode
// summed, and its quantiles interpolated within a bucket as Prometheus's
// histogram_quantile does.
func TestOverheadHistogram(t *testing.T) {
	h, err := parseHistogram([]byte(exposition), overheadMetric)
	if err != nil {
		t.Fatal(err)
	}
	if h.total != 10 {
		t.Fatalf("total %d, want 10", h.total)
	}
	var grown histogram
	grown.grow(histogram{}, h)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.2, 500 * time.Microsecond},  // rank 2: half into (0, 1] ms, which holds 4
		{0.5, 1250 * time.Microsecond}, // rank 5: a quarter into (1, 2] ms, which holds 4
		{0.95, 2 * time.Millisecond},   // rank 9.5: above the last finite bound
	} {
		if got := grown.quantile(c.q); got != c.want {
			t.Errorf("quantile %v = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (histogram{}).quantile(0.5); got != 0 {
		t.Errorf("empty histogram's median %v", got)
	}
	none, err := parseHistogram([]byte("# nothing\n"), overheadMetric)
	if err != nil || none.total != 0 {
		t.Fatalf("no histogram: %+v, %v", none, err)
	}
}
