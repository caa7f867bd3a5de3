package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// traceResult is one row's replay on one fleet size.
type traceResult struct {
	row        traceRow
	engines    int
	fleet      string
	rate       float64 // the arrivals' density over the trace's
	samples    []traceSample
	wall       time.Duration
	fleetDelta fleetDelta
	ttft, tpot time.Duration // the targets, modelled
}

// traceFigures are a row's figures, in modelled time.
type traceFigures struct {
	sent, answered, errors, tooLong int
	firstErr                        error
	ttft50, ttft90, ttft99          time.Duration
	tpot50, tpot99                  time.Duration
	attained                        float64 // share of the sent requests within both targets
	span                            float64 // modelled seconds from the first arrival to the last answer
	rps, tokensPS, goodput          float64
	cached, oracle                  float64 // shares of the prompt tokens
	late99                          time.Duration
	tokens                          int
}

// figures computes the row's figures.
func (r traceResult) figures() traceFigures {
	var f traceFigures
	var ttfts, tpots, lates []time.Duration
	var prompt, cached, reusable, sentTokens float64
	met := 0
	for i := range r.samples {
		s := &r.samples[i]
		if s.req.tooLong {
			f.tooLong++
			continue
		}
		f.sent++
		sentTokens += float64(s.req.in)
		reusable += float64(s.req.reusable)
		lates = append(lates, s.late)
		f.span = max(f.span, s.end.Seconds())
		if s.err != nil {
			f.errors++
			if f.firstErr == nil {
				f.firstErr = s.err
			}
			continue
		}
		f.answered++
		f.tokens += s.tokens
		ttfts = append(ttfts, s.ttft)
		tpots = append(tpots, s.tpot)
		prompt += float64(s.req.in)
		cached += float64(s.cached)
		if s.ttft <= r.ttft && s.tpot <= r.tpot {
			met++
		}
	}
	f.ttft50, f.ttft90, f.ttft99 = percentile(ttfts, 0.5), percentile(ttfts, 0.9), percentile(ttfts, 0.99)
	f.tpot50, f.tpot99 = percentile(tpots, 0.5), percentile(tpots, 0.99)
	f.late99 = percentile(lates, 0.99)
	f.attained = div(float64(met), float64(f.sent))
	f.rps, f.tokensPS, f.goodput = div(float64(f.answered), f.span), div(float64(f.tokens), f.span), div(float64(met), f.span)
	f.cached, f.oracle = div(cached, prompt), div(reusable, sentTokens)
	return f
}

// summary is the row in one line, for the progress output.
func (r traceResult) summary() string {
	f := r.figures()
	return fmt.Sprintf("%s on %d: %d answered, %d errors; TTFT p50 %.2fs p90 %.2fs; cached %.1f%% (oracle %.1f%%); %.2f req/s; engines' steps late by %v on average, %v at most",
		r.row.name, r.engines, f.answered, f.errors, f.ttft50.Seconds(), f.ttft90.Seconds(), 100*f.cached, 100*f.oracle, f.rps,
		r.fleetDelta.meanLag().Round(10*time.Microsecond), time.Duration(r.fleetDelta.maxLag*float64(time.Second)).Round(time.Millisecond))
}

// cpuBound is the row's warning when the CPUs, not the model, set its
// figures: the engines' steps ended later than their modelled end by
// more than meanLagLimit on average or maxLagLimit once, or the bench
// sent requests late by more than lateLimit (all modelled).
func (r traceResult) cpuBound(f traceFigures, scale timeScale) string {
	var why []string
	d := r.fleetDelta
	if mean, worst := d.meanLag(), time.Duration(d.maxLag*float64(time.Second)); mean > meanLagLimit || worst > maxLagLimit {
		why = append(why, fmt.Sprintf("engines' steps late by %v on average, %v at most", mean.Round(10*time.Microsecond), worst.Round(time.Millisecond)))
	}
	if late := scale.modelled(f.late99); late > lateLimit {
		why = append(why, fmt.Sprintf("requests sent %v late (p99)", late.Round(time.Millisecond)))
	}
	return strings.Join(why, ", ")
}

// The limits of cpuBound: a step late by a few milliseconds moves the
// times of its tokens by as much, and no figure of a row (TTFTs of
// tenths of seconds, TPOTs from the first token to the last) by more
// than a few percent.
const (
	meanLagLimit = 2 * time.Millisecond
	maxLagLimit  = 100 * time.Millisecond
	lateLimit    = 100 * time.Millisecond
)

// writeTrace prints the run: what ran where, then a row a line.
func writeTrace(w io.Writer, command string, tc *traceConfig, reqs []traceRequest, calib []calibRow, probes, results []traceResult, load *loadWatch, took time.Duration) {
	sent, in, out := 0, 0, 0
	for _, r := range reqs {
		if !r.tooLong {
			sent++
			in += r.in
			out += r.out
		}
	}
	last := reqs[len(reqs)-1].at
	fmt.Fprintf(w, "\n### Trace replay: %s, %d requests over %v at %gx its rate (%d longer than the context left out), %.0f prompt and %.0f output tokens on average\n\n",
		tc.file, sent, last.Round(time.Second), tc.rate, len(reqs)-sent, div(float64(in), float64(sent)), div(float64(out), float64(sent)))
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s. Timed engines (%s; mixed rows half %s), time scale %g: every figure is modelled time. Targets: TTFT %v, TPOT %v.\n\n",
		command, took.Round(time.Second), commit(), runtime.NumCPU(), load, tc.profile, tc.mixed, tc.scale, tc.ttft, tc.tpot)
	writeCalibration(w, tc, calib)
	if len(probes) > 0 {
		fmt.Fprintf(w, "The load: whole/least_loaded's TTFT p90 at each rate tried, until it exceeded %v:", tc.findP90)
		for _, p := range probes {
			fmt.Fprintf(w, " %gx %.2f s;", p.rate, p.figures().ttft90.Seconds())
		}
		fmt.Fprintf(w, " the rows ran at %gx.\n\n", tc.rate)
	}
	fmt.Fprintln(w, "| row | engines | answered (errors) | TTFT p50 · p90 · p99 s | TPOT p50 · p99 ms | SLO met | goodput req/s | cached share (oracle) | req/s | output tok/s | engine busy max · min / mean | preemptions | router CPU s (µs/token) | router peak RSS MiB | engines' CPU s, peak RSS MiB | engine steps late, mean · max ms |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |")
	var warnings []string
	for _, r := range results {
		f := r.figures()
		d := r.fleetDelta
		hi, lo := d.spread()
		fmt.Fprintf(w, "| %s | %d | %d (%d) | %.2f · %.2f · %.2f | %.0f · %.0f | %.1f%% | %.2f | %.1f%% (%.1f%%) | %.2f | %.0f | %.2f · %.2f | %.0f | %.1f (%.0f) | %.0f | %.1f, %.0f | %.2f · %.0f |\n",
			r.row.name, r.engines, f.answered, f.errors, f.ttft50.Seconds(), f.ttft90.Seconds(), f.ttft99.Seconds(), ms(f.tpot50), ms(f.tpot99),
			100*f.attained, f.goodput, 100*f.cached, 100*f.oracle, f.rps, f.tokensPS, hi, lo, d.preempts,
			d.caddyCPU.Seconds(), div(float64(d.caddyCPU.Microseconds()), float64(f.tokens)), float64(d.caddyPeak)/(1<<20), d.engineCPU.Seconds(), float64(d.enginePeak)/(1<<20), ms(d.meanLag()), 1000*d.maxLag)
		if why := r.cpuBound(f, tc.scale); why != "" {
			warnings = append(warnings, fmt.Sprintf("%s on %d engines: the CPU, not the model, was the bottleneck (%s): raise -time-scale", r.row.name, r.engines, why))
		}
		if f.firstErr != nil {
			warnings = append(warnings, fmt.Sprintf("%s on %d engines: %d errors, the first: %.300v", r.row.name, r.engines, f.errors, f.firstErr))
		}
	}
	for _, line := range warnings {
		fmt.Fprintf(w, "\n⚠ %s\n", line)
	}
	goals := traceGoals(results)
	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(w, "\n#### Against the goals (✗: missed)\n\n| goal | measured | want |\n| --- | --: | --- |")
	for _, g := range goals {
		mark := ""
		if g.missed {
			mark = " ✗"
		}
		fmt.Fprintf(w, "| %s | %.2f%s | %s |\n", g.name, g.got, mark, g.want)
	}
}
