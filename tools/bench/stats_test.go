package main

import (
	"errors"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestTallyCountsErrorsApartAndCaddyPerRequest(t *testing.T) {
	var tl tally
	tl.add([]sample{
		{latency: 10 * time.Millisecond, ttft: 2 * time.Millisecond, gaps: []time.Duration{time.Millisecond, 3 * time.Millisecond}},
		{latency: 20 * time.Millisecond, ttft: 4 * time.Millisecond, gaps: []time.Duration{2 * time.Millisecond}},
		{err: errors.New("boom")},
		{latency: 30 * time.Millisecond, ttft: 6 * time.Millisecond},
	}, 2*time.Second)
	tl.addCaddy(caddySample{procSample: procSample{cpu: time.Second, rss: 5 << 20}, mallocs: 100, allocBytes: 1 << 20},
		caddySample{procSample: procSample{cpu: 1200 * time.Millisecond, rss: 7 << 20}, mallocs: 500, allocBytes: 3 << 20})
	f := tl.figures()
	if f.requests != 3 || f.errors != 1 || tl.firstErr == nil {
		t.Errorf("requests %d, errors %d (first %v); want 3 and 1", f.requests, f.errors, tl.firstErr)
	}
	if f.rps != 1.5 || f.p50 != 20*time.Millisecond || f.ttft50 != 4*time.Millisecond || f.gap50 != 2*time.Millisecond || f.gap99 != 3*time.Millisecond {
		t.Errorf("figures %+v", f)
	}
	// Caddy's work is shared by every request sent, failed ones too.
	if f.cpuMS != 50 || f.allocs != 100 || f.allocKiB != 512 || f.rssMiB != 7 {
		t.Errorf("Caddy per request: %.1f ms, %.0f allocs, %.0f KiB, RSS %.0f MiB; want 50, 100, 512, 7", f.cpuMS, f.allocs, f.allocKiB, f.rssMiB)
	}
}
