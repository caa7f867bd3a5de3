package main

import (
	"math"
	"slices"
	"time"
)

// tally gathers one party's figures on one row over every round.
type tally struct {
	requests int // answered without error
	errors   int
	firstErr error
	wall     time.Duration
	latency  []time.Duration
	ttft     []time.Duration
	gaps     []time.Duration

	// The party's Caddy over its segments; zero without one.
	caddy      bool
	cpu        time.Duration
	mallocs    uint64
	allocBytes uint64
	rss        int64     // the largest resident set after a segment
	own        histogram // the router's own part of the time to first token

	decoded []float64 // tokens each engine decoded over the segments
}

// add records a segment's requests and wall time.
func (t *tally) add(samples []sample, wall time.Duration) {
	t.wall += wall
	for _, s := range samples {
		if s.err != nil {
			t.errors++
			if t.firstErr == nil {
				t.firstErr = s.err
			}
			continue
		}
		t.requests++
		t.latency = append(t.latency, s.latency)
		if s.ttft > 0 {
			t.ttft = append(t.ttft, s.ttft)
		}
		t.gaps = append(t.gaps, s.gaps...)
	}
}

// addCaddy records the Caddy's counters around a segment.
func (t *tally) addCaddy(before, after caddySample) {
	t.caddy = true
	t.cpu += after.cpu - before.cpu
	t.mallocs += after.mallocs - before.mallocs
	t.allocBytes += after.allocBytes - before.allocBytes
	t.rss = max(t.rss, after.rss)
}

// addDecoded records what each engine decoded over a segment.
func (t *tally) addDecoded(before, after []float64) {
	if t.decoded == nil {
		t.decoded = make([]float64, len(after))
	}
	for i := range after {
		t.decoded[i] += after[i] - before[i]
	}
}

// figures are a tally's results.
type figures struct {
	rps                 float64
	p50, p99            time.Duration
	ttft50              time.Duration
	own50               time.Duration // the router's own part of ttft50's kind, p50; 0 without a router
	gap50, gap99        time.Duration
	cpuMS               float64 // Caddy CPU per request
	allocs, allocKiB    float64 // Caddy heap allocations per request
	rssMiB              float64
	requests, errors    int
	decodedShare        []float64 // of the tokens decoded, each engine's part
	streamed, withCaddy bool
}

func (t *tally) figures() figures {
	f := figures{requests: t.requests, errors: t.errors, streamed: len(t.ttft) > 0, withCaddy: t.caddy}
	if t.wall > 0 {
		f.rps = float64(t.requests) / t.wall.Seconds()
	}
	f.p50, f.p99 = percentile(t.latency, 0.50), percentile(t.latency, 0.99)
	f.ttft50 = percentile(t.ttft, 0.50)
	f.own50 = t.own.quantile(0.50)
	f.gap50, f.gap99 = percentile(t.gaps, 0.50), percentile(t.gaps, 0.99)
	var all float64
	for _, d := range t.decoded {
		all += d
	}
	for _, d := range t.decoded {
		f.decodedShare = append(f.decodedShare, div(d, all))
	}
	if n := t.requests + t.errors; n > 0 && t.caddy {
		f.cpuMS = float64(t.cpu.Microseconds()) / 1000 / float64(n)
		f.allocs = float64(t.mallocs) / float64(n)
		f.allocKiB = float64(t.allocBytes) / 1024 / float64(n)
		f.rssMiB = float64(t.rss) / (1 << 20)
	}
	return f
}

// percentile returns the nearest-rank p-quantile of ds (0 when empty). It
// sorts ds in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
