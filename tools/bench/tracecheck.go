package main

import (
	"fmt"
	"math"
	"strings"
)

// The goals of a trace replay (-trace -check), ratios within one run, on
// each fleet size where their rows ran:
//
//   - prefix_aware's TTFT p90 at most traceVsLeast of least_loaded's and
//     traceVsRound of round_robin's;
//   - its cached share at least traceOracle of the oracle's;
//   - its output tokens a second at least least_loaded's;
//   - slo_aware's goodput at least traceGoodput of least_loaded's on the
//     mixed fleet;
//   - three replicas within traceReplicas of one Caddy (TTFT p90, output
//     tokens a second, cached share);
//   - no request failed.
const (
	traceVsLeast  = 0.5
	traceVsRound  = 0.25
	traceOracle   = 0.9
	traceGoodput  = 1.5
	traceReplicas = 0.10
)

// traceGoal is one goal's outcome.
type traceGoal struct {
	name   string
	got    float64 // the ratio measured
	want   string  // the bound, as a sentence
	missed bool
}

// traceGoals holds the results to the goals, each size on its own.
func traceGoals(results []traceResult) []traceGoal {
	type key struct {
		name    string
		engines int
	}
	by := map[key]traceFigures{}
	sizes := []int{}
	for _, r := range results {
		if _, ok := by[key{"", r.engines}]; !ok {
			by[key{"", r.engines}] = traceFigures{}
			sizes = append(sizes, r.engines)
		}
		by[key{r.row.name, r.engines}] = r.figures()
	}
	var goals []traceGoal
	add := func(n int, name string, got float64, atMost bool, bound float64) {
		g := traceGoal{name: fmt.Sprintf("%s (%d engines)", name, n), got: got}
		if atMost {
			g.want, g.missed = fmt.Sprintf("at most %.2f", bound), !(got <= bound)
		} else {
			g.want, g.missed = fmt.Sprintf("at least %.2f", bound), !(got >= bound)
		}
		goals = append(goals, g)
	}
	for _, n := range sizes {
		get := func(name string) (traceFigures, bool) { f, ok := by[key{name, n}]; return f, ok }
		pa, okPA := get("whole/prefix_aware")
		if ll, ok := get("whole/least_loaded"); ok && okPA {
			add(n, "prefix_aware TTFT p90 / least_loaded's", ratio(pa.ttft90.Seconds(), ll.ttft90.Seconds()), true, traceVsLeast)
			add(n, "prefix_aware output tokens/s / least_loaded's", ratio(pa.tokensPS, ll.tokensPS), false, 1)
		}
		if rr, ok := get("whole/round_robin"); ok && okPA {
			add(n, "prefix_aware TTFT p90 / round_robin's", ratio(pa.ttft90.Seconds(), rr.ttft90.Seconds()), true, traceVsRound)
		}
		if okPA {
			add(n, "prefix_aware cached share / the oracle's", ratio(pa.cached, pa.oracle), false, traceOracle)
		}
		if slo, ok := get("mixed/slo_aware"); ok {
			if ll, ok := get("mixed/least_loaded"); ok {
				add(n, "mixed fleet: slo_aware goodput / least_loaded's", ratio(slo.goodput, ll.goodput), false, traceGoodput)
			}
		}
		if rep, ok := get("replicas-3/prefix_aware"); ok && okPA {
			add(n, "three replicas' TTFT p90 / one Caddy's", ratio(rep.ttft90.Seconds(), pa.ttft90.Seconds()), true, 1+traceReplicas)
			add(n, "three replicas' output tokens/s / one Caddy's", ratio(rep.tokensPS, pa.tokensPS), false, 1-traceReplicas)
			add(n, "three replicas' cached share / one Caddy's", ratio(rep.cached, pa.cached), false, 1-traceReplicas)
		}
	}
	for _, r := range results {
		if f := r.figures(); f.errors > 0 {
			goals = append(goals, traceGoal{name: fmt.Sprintf("%s (%d engines): failed requests", r.row.name, r.engines), got: float64(f.errors), want: "none", missed: true})
		}
	}
	return goals
}

// ratio is a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// checkTrace fails when a goal is missed, the calibration's included.
func checkTrace(calib []calibRow, results []traceResult) error {
	var missed []string
	for _, r := range calib {
		if !r.withinTTFT || !r.withinTPOT {
			missed = append(missed, fmt.Sprintf("one engine alone, %d prompt tokens: TTFT %+.1f%%, TPOT %+.1f%% off the profile, want within %.0f%%", r.prompt, 100*r.ttftOff, 100*r.tpotOff, 100*calibTolerance))
		}
	}
	for _, g := range traceGoals(results) {
		if g.missed {
			missed = append(missed, fmt.Sprintf("%s is %.2f, want %s", g.name, g.got, g.want))
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("trace: goals missed: %s", strings.Join(missed, "; "))
	}
	return nil
}
