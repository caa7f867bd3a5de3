package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// fairResult is one scenario on one router.
type fairResult struct {
	scenario fairScenario
	gate     bool
	a, b     tenantFigures // a is empty when A sent nothing
	failures int
	firstErr error
	window   time.Duration
	status   fleet.ModelStatus // at the window's end
	replicas int               // > 1: gate says whether they share (-replicas)
}

func (r fairResult) title() string {
	if r.replicas > 1 {
		return fmt.Sprintf("%s, %d replicas, sharing %s", r.scenario.name, r.replicas, onOff(r.gate))
	}
	return fmt.Sprintf("%s, gate %s", r.scenario.name, onOff(r.gate))
}

// ratio is B's TTFT p50 over A's; 0 without A.
func (r fairResult) ratio() float64 { return div(float64(r.b.p50), float64(r.a.p50)) }

// missed says whether the result misses its scenario's goal: only the
// gate's router is held to it.
func (r fairResult) missed() bool {
	return r.gate && r.scenario.goal > 0 && (r.a.requests == 0 || r.ratio() > r.scenario.goal)
}

func (r fairResult) summary() string {
	s := fmt.Sprintf("%s: B TTFT p50 %.1f ms (%d requests)", r.title(), ms(r.b.p50), r.b.requests)
	if r.scenario.flood > 0 {
		s += fmt.Sprintf(", A %.1f ms (%d), B/A %.3f", ms(r.a.p50), r.a.requests, r.ratio())
	}
	return s + fmt.Sprintf(", %d failures, window %v (load %s)", r.failures, r.window.Round(time.Millisecond), loadAverage())
}

// fairColumns are the table's columns; the test reads the table by them.
var fairColumns = []string{"scenario", "gate", "B requests", "B TTFT p50 ms", "B TTFT p99 ms",
	"A requests", "A TTFT p50 ms", "A TTFT p99 ms", "B/A p50", "goal", "failures"}

// writeFairness prints the fairness run: what ran where, the table, and
// what it shows.
func writeFairness(w io.Writer, args []string, cfg *config, results []fairResult, load *loadWatch, took time.Duration) {
	fmt.Fprintf(w, "### Fairness benchmark, %s\n\n", time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s; the bench, the two Caddys and their four engines share them.\n\n",
		commandLine(args), took.Round(time.Second), commit(), runtime.NumCPU(), load)
	if cfg.replicas > 1 {
		fmt.Fprintf(w, "**%d replicas** (issue 28), twice: %d Caddys with the `mlc` global option's `cluster` (a redis-server the bench starts; **sharing on**: "+
			"each replica's gate leaves the others their share of the engines) and %d without it (**sharing off**: each replica's gate is its own). "+
			"In each, the first replica spawns the engines as below; the others list them `external` with `max_inflight %d`. "+
			"A's streams take the replicas in turn; B sends through the last. The figures below are the replicas' summed `/mlc/engines`.\n\n",
			cfg.replicas, cfg.replicas, cfg.replicas, fairBatch)
	}
	fmt.Fprintf(w, "Two Caddys, each one `mlc_router` in `mode whole` that spawns %d built-in engines with `--overrides max_num_sequence=%d` (%d slots), "+
		"the tenant from `%s`, the band from `%s`: **gate on** (the default: each engine gets at most its batch, the rest waits in the router's fair queue, "+
		"by band, then fair on tokens across tenants) and **gate off** (`max_inflight off`: every request goes to an engine at once and waits in its queue). "+
		"Each scenario runs on one, then the other. Streams of %d random token ids, temperature 0; A: %d streams of max_tokens %d, band 0; "+
		"B: max_tokens %d–%d, one stream at a time, or %d streams in band 1 when both flood. "+
		"TTFT is from sending a request to its first event. Measured: the requests that began once A's flood saturated the engines "+
		"(every slot taken and more waiting, by the router's `/mlc/engines`), each to its end with the load still on.\n\n",
		fairEngines, fairBatch, fairEngines*fairBatch, headerTenant, headerPriority,
		cfg.promptLen, cfg.flood, cfg.floodTokens, bMinTokens, bMaxTokens, cfg.bStreams)
	fmt.Fprintf(w, "| %s |\n", strings.Join(fairColumns, " | "))
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range results {
		gate := fmt.Sprintf("on (%d slots)", r.status.Gate.Capacity)
		switch {
		case r.replicas > 1:
			gate = fmt.Sprintf("%d replicas, sharing %s", r.replicas, onOff(r.gate))
		case !r.gate && r.status.Gate.Capacity < 0:
			gate = "off"
		case !r.gate:
			gate = fmt.Sprintf("off, yet %d slots", r.status.Gate.Capacity)
		}
		a := []string{"–", "–", "–"}
		ratio, goal := "–", "–"
		if r.scenario.flood > 0 {
			a = []string{fmt.Sprint(r.a.requests), fmt.Sprintf("%.1f", ms(r.a.p50)), fmt.Sprintf("%.1f", ms(r.a.p99))}
			ratio = fmt.Sprintf("%.3f", r.ratio())
		}
		if r.scenario.goal > 0 {
			goal = "– (no gate)"
			if r.replicas > 1 {
				goal = "– (not shared)"
			}
			if r.gate {
				goal = fmt.Sprintf("≤ %.1f %s", r.scenario.goal, mark(r.missed()))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.1f | %s | %s | %s | %s | %s | %d |\n", r.scenario.name, gate,
			r.b.requests, ms(r.b.p50), ms(r.b.p99), a[0], a[1], a[2], ratio, goal, r.failures)
	}
	fmt.Fprintln(w)
	for _, r := range results {
		if !r.gate || r.scenario.bBand == 0 || r.scenario.flood == 0 {
			continue
		}
		slots := fairEngines * fairBatch
		if r.scenario.bStreams < slots {
			fmt.Fprintf(w, "- %s: B keeps %d streams in flight, fewer than the engines' %d slots, so band 1 never holds them all: A is slowed, not starved (gate on: %d of A's requests answered in the %.1f s window).\n",
				r.scenario.name, r.scenario.bStreams, slots, r.a.requests, r.window.Seconds())
		} else {
			fmt.Fprintf(w, "- %s: B keeps %d streams in flight, as many as the engines' %d slots or more: band 1 may take them all and starve A.\n",
				r.scenario.name, r.scenario.bStreams, slots)
		}
	}
	var aTok, bTok float64
	var aN, bN int
	for _, r := range results {
		aTok += r.a.tokens * float64(r.a.requests)
		bTok += r.b.tokens * float64(r.b.requests)
		aN += r.a.requests
		bN += r.b.requests
	}
	fmt.Fprintf(w, "- Tokens generated per request (usage): A %.1f, B %.1f.\n", div(aTok, float64(aN)), div(bTok, float64(bN)))
	fmt.Fprintf(w, "- Goals (issue 23), gate on: B's TTFT p50 ≤ %.1f× A's under A's flood, and with both flooding, B in band 1; no request fails. %s\n",
		goalFairShare, verdictLine(results))
}

// verdictLine says which goals the results miss.
func verdictLine(results []fairResult) string {
	var missed []string
	failures := 0
	for _, r := range results {
		if r.missed() {
			missed = append(missed, fmt.Sprintf("%s (B/A %.3f)", r.title(), r.ratio()))
		}
		failures += r.failures
	}
	if failures > 0 {
		missed = append(missed, fmt.Sprintf("%d requests failed", failures))
	}
	if len(missed) == 0 {
		return "Met."
	}
	return "Missed ✗: " + strings.Join(missed, "; ") + "."
}

// fairVerdict is the run's outcome: a failed request always fails it; a
// missed goal only with -check.
func fairVerdict(results []fairResult, check bool) error {
	var errs []error
	for _, r := range results {
		if r.failures > 0 {
			errs = append(errs, fmt.Errorf("%s: %d requests failed, the first: %w", r.title(), r.failures, r.firstErr))
		}
		if check && r.missed() {
			errs = append(errs, fmt.Errorf("%s: B's TTFT p50 is %.3f× A's, the goal at most %.1f×", r.title(), r.ratio(), r.scenario.goal))
		}
	}
	return errors.Join(errs...)
}

// mark is a goal's cell: ✗ missed, ✓ met.
func mark(missed bool) string {
	if missed {
		return "✗"
	}
	return "✓"
}
