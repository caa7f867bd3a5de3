package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The goals the router is held to (issue 12); a figure that misses its
// goal is marked ✗ in the summary.
const (
	goalVsSplit   = 0.95                   // router req/s over split's, at least
	goalVsProxy   = 1.0                    // router req/s over reverse_proxy's, at least
	goalTTFTAdded = 500 * time.Microsecond // router TTFT p50 over reverse_proxy's, at most
	goalCPU       = 1.2                    // router CPU per request over reverse_proxy's, at most
	goalGapAdded  = 200 * time.Microsecond // router gap p99 over split's, at most
	goalDisaggTTF = 2.0                    // disagg TTFT p50 over one engine's, at concurrency 16
	goalOwnDisagg = time.Millisecond       // disagg: the router's own part of the time to first token, p50 at concurrency 1
)

// rowResult is one row: every party's figures.
type rowResult struct {
	row     row
	parties []*party
	figs    map[string]figures
}

// writeRow prints one row's table and its ratios.
func writeRow(w io.Writer, rr rowResult) {
	fmt.Fprintf(w, "\n##### %s (%d requests per party)\n\n", rr.row.title(), rr.figs[keySplit].requests+rr.figs[keySplit].errors)
	fmt.Fprintln(w, "| party | req/s | p50 ms | p99 ms | TTFT p50 ms | router's own p50 µs | gap p50 µs | gap p99 µs | Caddy CPU ms/req | allocs/req | KiB alloc/req | Caddy RSS MiB | decoded by engine 1/2 % | errors |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, p := range rr.parties {
		f := rr.figs[p.key]
		stream := func(d time.Duration, unit time.Duration) string {
			if !f.streamed {
				return "–"
			}
			return fmt.Sprintf("%.*f", decimals(unit), float64(d)/float64(unit))
		}
		caddy := func(v float64, prec int) string {
			if !f.withCaddy {
				return "–"
			}
			return fmt.Sprintf("%.*f", prec, v)
		}
		own := "–"
		if f.own50 > 0 {
			own = fmt.Sprintf("%d", f.own50.Microseconds())
		}
		fmt.Fprintf(w, "| %s | %.1f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n",
			p.label, f.rps, ms(f.p50), ms(f.p99), stream(f.ttft50, time.Millisecond), own,
			stream(f.gap50, time.Microsecond), stream(f.gap99, time.Microsecond),
			caddy(f.cpuMS, 3), caddy(f.allocs, 0), caddy(f.allocKiB, 1), caddy(f.rssMiB, 1), shares(f.decodedShare), f.errors)
	}
	fmt.Fprintf(w, "\n%s\n", strings.Join(ratios(rr), "; "))
}

// ratios are the comparisons the goals are stated in.
func ratios(rr rowResult) []string {
	split, proxy, router, disagg, direct := rr.figs[keySplit], rr.figs[keyProxy], rr.figs[keyRouter], rr.figs[keyDisagg], rr.figs[keyDirect]
	out := []string{
		fmt.Sprintf("mlc_router: %.3f× split, %.3f× reverse_proxy req/s", div(router.rps, split.rps), div(router.rps, proxy.rps)),
		fmt.Sprintf("p50 %+.2f ms vs reverse_proxy", ms(router.p50-proxy.p50)),
		fmt.Sprintf("CPU %.2f× reverse_proxy", div(router.cpuMS, proxy.cpuMS)),
	}
	if router.streamed {
		out = append(out,
			fmt.Sprintf("TTFT p50 %+.2f ms vs reverse_proxy", ms(router.ttft50-proxy.ttft50)),
			fmt.Sprintf("gap p99 %+d µs vs split", (router.gap99-split.gap99).Microseconds()))
	}
	out = append(out, fmt.Sprintf("disagg: p50 %+.2f ms vs one engine; the router's own part of its time to first token %d µs (p50)", ms(disagg.p50-direct.p50), disagg.own50.Microseconds()))
	if disagg.streamed {
		out = append(out, fmt.Sprintf("TTFT p50 %.2f× one engine (%.2f vs %.2f ms)", div(float64(disagg.ttft50), float64(direct.ttft50)), ms(disagg.ttft50), ms(direct.ttft50)))
	}
	return out
}

// writeCompact prints the figures that matter most, one line per row: the
// table for the project's docs/benchmarks.md.
func writeCompact(w io.Writer, rows []rowResult) {
	tableHead(w, "In short", "| row | req/s: split · reverse_proxy · mlc_router · disagg · one engine | TTFT p50 ms: reverse_proxy · mlc_router · disagg · one engine | Caddy CPU ms/req: reverse_proxy · mlc_router · disagg |",
		"| --- | --- | --- | --- |")
	for _, rr := range rows {
		f := func(key string) figures { return rr.figs[key] }
		ttft := "–"
		if rr.row.stream {
			ttft = fmt.Sprintf("%.1f · %.1f · %.1f · %.1f", ms(f(keyProxy).ttft50), ms(f(keyRouter).ttft50), ms(f(keyDisagg).ttft50), ms(f(keyDirect).ttft50))
		}
		fmt.Fprintf(w, "| %s | %.0f · %.0f · %.0f · %.0f · %.0f | %s | %.2f · %.2f · %.2f |\n", rr.row.name(),
			f(keySplit).rps, f(keyProxy).rps, f(keyRouter).rps, f(keyDisagg).rps, f(keyDirect).rps, ttft,
			f(keyProxy).cpuMS, f(keyRouter).cpuMS, f(keyDisagg).cpuMS)
	}
}

// writeSummary prints one line per row with the goals' figures.
func writeSummary(w io.Writer, rows []rowResult) {
	tableHead(w, "Against the goals (✗: missed)", "| row | router / split req/s | router / reverse_proxy req/s | router TTFT p50 − reverse_proxy | router gap p99 − split | router CPU / reverse_proxy | disagg TTFT p50 / one engine | disagg p50 − one engine | disagg: the router's own p50 | disagg CPU ms/req |",
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, rr := range rows {
		split, proxy, router, disagg, direct := rr.figs[keySplit], rr.figs[keyProxy], rr.figs[keyRouter], rr.figs[keyDisagg], rr.figs[keyDirect]
		vsSplit, vsProxy := div(router.rps, split.rps), div(router.rps, proxy.rps)
		cpu := div(router.cpuMS, proxy.cpuMS)
		ttft, gap, disaggTTFT := "–", "–", "–"
		if router.streamed {
			d := router.ttft50 - proxy.ttft50
			ttft = fmt.Sprintf("%+.2f ms%s", ms(d), miss(d > goalTTFTAdded))
			g := router.gap99 - split.gap99
			gap = fmt.Sprintf("%+d µs%s", g.Microseconds(), miss(g > goalGapAdded))
			r := div(float64(disagg.ttft50), float64(direct.ttft50))
			disaggTTFT = fmt.Sprintf("%.2f×%s", r, miss(rr.row.conc == 16 && r > goalDisaggTTF))
		}
		own := fmt.Sprintf("%.2f ms%s", ms(disagg.own50), miss(rr.row.conc == 1 && disagg.own50 > goalOwnDisagg))
		fmt.Fprintf(w, "| %s | %.3f%s | %.3f%s | %s | %s | %.2f%s | %s | %+.2f ms | %s | %.3f |\n", rr.row.name(),
			vsSplit, miss(vsSplit < goalVsSplit), vsProxy, miss(vsProxy < goalVsProxy), ttft, gap,
			cpu, miss(cpu > goalCPU), disaggTTFT, ms(disagg.p50-direct.p50), own, disagg.cpuMS)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Goals: router ≥ %.2f× split and ≥ %.2f× reverse_proxy req/s; TTFT p50 ≤ reverse_proxy + %v; CPU/request ≤ %.1f× reverse_proxy's; gap p99 ≤ split + %v; disagg TTFT p50 at concurrency 16 ≤ %.0f× one engine; the router's own part of disagg's time to first token (caddy_mlc_router_overhead_seconds: not waiting on an engine) p50 ≤ %v at concurrency 1.\n",
		goalVsSplit, goalVsProxy, goalTTFTAdded, goalCPU, goalGapAdded, goalDisaggTTF, goalOwnDisagg)
}

// shares writes each engine's part as whole percents: 50/50.
func shares(parts []float64) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = fmt.Sprintf("%.0f", 100*p)
	}
	return strings.Join(s, "/")
}

func miss(b bool) string {
	if b {
		return " ✗"
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func decimals(unit time.Duration) int {
	if unit >= time.Millisecond {
		return 2
	}
	return 0
}

// tableHead starts a table of the report under a heading: its head and
// its alignment row.
func tableHead(w io.Writer, title, head, align string) {
	fmt.Fprintf(w, "\n#### %s\n\n%s\n%s\n", title, head, align)
}
