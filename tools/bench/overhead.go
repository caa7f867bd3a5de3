package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// overheadMetric is the router's histogram of its own part of the time to
// first token: what it spent on its own work, not waiting on an engine.
// The bench reads it from each router's Caddy around its segments; it is
// the measure of issue 12's goal for disaggregation's added latency.
const overheadMetric = "caddy_mlc_router_overhead_seconds"

// histogram is a Prometheus histogram at one moment: cumulative counts by
// upper bound, every label set summed. The zero value is an empty one.
type histogram struct {
	bounds []float64
	counts []uint64
	total  uint64 // observations, those above the last bound included
}

// readOverhead reads the router's overhead histogram from the Caddy's
// admin /metrics. A Caddy without a router (reverse_proxy) has none: the
// empty histogram.
func (c *caddyProc) readOverhead(ctx context.Context) (histogram, error) {
	body, err := c.adminGet(ctx, "/metrics", adminTimeout)
	if err != nil {
		return histogram{}, err
	}
	return parseHistogram(body, overheadMetric)
}

// parseHistogram finds the histogram name in a Prometheus text exposition,
// with Prometheus's own parser.
func parseHistogram(body []byte, name string) (histogram, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return histogram{}, fmt.Errorf("/metrics: %w", err)
	}
	var h histogram
	fam, ok := families[name]
	if !ok {
		return h, nil
	}
	for _, m := range fam.GetMetric() {
		buckets := m.GetHistogram().GetBucket()
		if h.bounds == nil {
			h.counts = make([]uint64, len(buckets))
			for _, b := range buckets {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
		}
		if len(buckets) != len(h.bounds) {
			return histogram{}, fmt.Errorf("%s: label sets with different buckets", name)
		}
		for i, b := range buckets {
			h.counts[i] += b.GetCumulativeCount()
		}
		h.total += m.GetHistogram().GetSampleCount()
	}
	return h, nil
}

// grow adds what after has more than before to h: the observations made
// between the two readings.
func (h *histogram) grow(before, after histogram) {
	if after.bounds == nil {
		return
	}
	if h.bounds == nil {
		h.bounds, h.counts = after.bounds, make([]uint64, len(after.counts))
	}
	for i := range after.counts {
		var b uint64
		if before.counts != nil {
			b = before.counts[i]
		}
		h.counts[i] += after.counts[i] - b
	}
	h.total += after.total - before.total
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket that holds it. It is 0 without
// observations.
func (h histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := q * float64(h.total)
	lower, below := 0.0, uint64(0)
	for i, c := range h.counts {
		upper := h.bounds[i]
		if math.IsInf(upper, 1) {
			break
		}
		if float64(c) >= rank {
			frac := 1.0
			if in := float64(c - below); in > 0 {
				frac = (rank - float64(below)) / in
			}
			return seconds(lower + frac*(upper-lower))
		}
		lower, below = upper, c
	}
	return seconds(lower) // beyond the last finite bound: that bound
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
