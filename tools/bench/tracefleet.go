package main

import (
	"context"
	"fmt"
	"time"
)

// What a trace row reads of its fleet before and after the replay: each
// engine's counters (its modelled busy time and lag, the tokens it
// computed, its preemptions) and each Caddy's CPU time and memory.

// The engines' counters a row reads, in the order fleetReading keeps
// them.
const (
	ctrBusy = iota
	ctrLag
	ctrSteps
	ctrMaxLag
	ctrPrefill
	ctrDecode
	ctrPreempt
	ctrCount
)

// counterNames are the /metrics names of the counters, by index.
func counterNames() [ctrCount]string {
	return [ctrCount]string{
		"mlc_engine_timed_busy_seconds_total", "mlc_engine_timed_lag_seconds_total", "mlc_engine_timed_steps_total",
		"mlc_engine_timed_lag_max_seconds", "mlc_engine_prefill_tokens_total", "mlc_engine_decode_tokens_total",
		"mlc_engine_preemptions_total",
	}
}

// fleetReading is what the engines and the Caddys said at one moment.
type fleetReading struct {
	engines [][ctrCount]float64
	procs   []procSample // the engines'
	caddys  []procSample
}

// readFleet reads every engine's counters and process, and every Caddy's
// process.
func readFleet(ctx context.Context, engines []string, procs []*proc, caddys []*caddyProc) (fleetReading, error) {
	var r fleetReading
	names := counterNames()
	for _, e := range engines {
		body, err := getBody(ctx, "http://"+e+"/metrics")
		if err != nil {
			return r, err
		}
		var v [ctrCount]float64
		for i, name := range names {
			if v[i], err = counterValue(body, name); err != nil {
				return r, fmt.Errorf("%s/metrics: %w", e, err)
			}
		}
		r.engines = append(r.engines, v)
	}
	for _, p := range procs {
		s, err := readProc(p.pid())
		if err != nil {
			return r, fmt.Errorf("%s: %w", p.name, err)
		}
		r.procs = append(r.procs, s)
	}
	for _, c := range caddys {
		s, err := readProc(c.pid())
		if err != nil {
			return r, fmt.Errorf("%s: %w", c.name, err)
		}
		r.caddys = append(r.caddys, s)
	}
	return r, nil
}

// fleetDelta is what the fleet did between two readings.
type fleetDelta struct {
	busy                      []float64 // each engine's modelled busy seconds
	lag, steps, maxLag        float64   // the engines' lag (modelled s), steps, and worst step's lag
	prefill, decode, preempts float64
	caddyCPU                  time.Duration // every Caddy's
	caddyPeak                 int64         // the largest resident set of a Caddy, bytes
	engineCPU                 time.Duration // every engine's
	enginePeak                int64         // the largest resident set of an engine, bytes
}

// since is what happened from before to r.
func (r fleetReading) since(before fleetReading) fleetDelta {
	var d fleetDelta
	for i, a := range r.engines {
		b := before.engines[i]
		d.busy = append(d.busy, a[ctrBusy]-b[ctrBusy])
		d.lag += a[ctrLag] - b[ctrLag]
		d.steps += a[ctrSteps] - b[ctrSteps]
		d.maxLag = max(d.maxLag, a[ctrMaxLag])
		d.prefill += a[ctrPrefill] - b[ctrPrefill]
		d.decode += a[ctrDecode] - b[ctrDecode]
		d.preempts += a[ctrPreempt] - b[ctrPreempt]
	}
	for i, a := range r.procs {
		d.engineCPU += a.cpu - before.procs[i].cpu
		d.enginePeak = max(d.enginePeak, a.peak)
	}
	for i, a := range r.caddys {
		d.caddyCPU += a.cpu - before.caddys[i].cpu
		d.caddyPeak = max(d.caddyPeak, a.peak)
	}
	return d
}

// spread is the engines' busy time at most and at least, over its mean:
// 1 and 1 when the work was even.
func (d fleetDelta) spread() (hi, lo float64) {
	if len(d.busy) == 0 {
		return 0, 0
	}
	sum, hi, lo := 0.0, d.busy[0], d.busy[0]
	for _, b := range d.busy {
		sum += b
		hi, lo = max(hi, b), min(lo, b)
	}
	mean := sum / float64(len(d.busy))
	return div(hi, mean), div(lo, mean)
}

// meanLag is how late the engines' steps ended on average against their
// modelled end, modelled: the jitter of a timer wake-up when the CPUs
// keep up, more as they fall behind.
func (d fleetDelta) meanLag() time.Duration {
	return time.Duration(div(d.lag, d.steps) * float64(time.Second))
}
