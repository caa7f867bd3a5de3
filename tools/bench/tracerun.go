package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
)

// The trace replay (-trace, issue "a fleet on paper"): a trace in the
// Mooncake format replayed, at its own times (or denser, -trace-rate),
// on fleets of timed engines (`caddy mlc-engine --timing`: each waits
// what a GPU would take, so that tens of them fit two cores) behind one
// Caddy per row, or three sharing through the cluster option. Every
// figure is in modelled time: the engines run -time-scale times slower
// than real time, the arrivals too, and the bench divides what it
// measures by the scale.

// traceConfig is the -trace run's command line.
type traceConfig struct {
	file       string
	window     traceWindow
	rate       float64 // arrivals this many times denser than the trace's
	sizes      []int   // the fleets' sizes, each row run on each
	rows       []traceRow
	profile    string        // the engines' timing profile
	mixed      string        // the other half of a mixed fleet
	scale      timeScale     // the engines' --time-scale, and the arrivals'
	ttft, tpot time.Duration // the latency targets, modelled
	// findP90, when set, makes -trace-rate the first of a search: the
	// rate rises by loadStep until whole/least_loaded's TTFT p90 on the
	// first size exceeds it, and the rows run at that rate.
	findP90 time.Duration

	windowFlag, sizesFlag, rowsFlag string
}

// flags registers the run's flags.
func (c *traceConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.file, "trace", "", "replay a trace in the Mooncake format (timestamp, input_length, output_length, hash_ids of 512-token blocks) on fleets of timed engines instead, e.g. ../shared/traces/mooncake-synthetic.jsonl")
	fs.StringVar(&c.windowFlag, "trace-window", "", "-trace: the part of the trace to replay, D (the first D) or A-B (5m, 2m-4m); default all of it (with -quick the first minute)")
	fs.Float64Var(&c.rate, "trace-rate", 1, "-trace: arrivals this many times denser than the trace's")
	fs.StringVar(&c.sizesFlag, "trace-sizes", "16", "-trace: the fleets' sizes in engines, each row on each (with -quick 8)")
	fs.StringVar(&c.rowsFlag, "trace-rows", "", "-trace: the rows to run, comma-separated (default every one: "+strings.Join(traceRowNames(), ",")+")")
	fs.StringVar(&c.profile, "trace-profile", "h100-llama3-8b", "-trace: the engines' timing profile ("+strings.Join(timing.ProfileNames(), ", ")+")")
	fs.StringVar(&c.mixed, "trace-mixed", "a100-llama3-8b", "-trace: the profile of half the engines of the mixed rows")
	fs.Float64Var((*float64)(&c.scale), "time-scale", 1, "-trace, -agents-timing: the engines' --time-scale: the fleet runs this many times slower than real time, the arrivals and tool times too; figures are modelled time")
	fs.DurationVar(&c.ttft, "trace-ttft", 2*time.Second, "-trace: the time-to-first-token target of the SLO attainment (goodput), modelled")
	fs.DurationVar(&c.tpot, "trace-tpot", 100*time.Millisecond, "-trace: the time-per-output-token target of the SLO attainment, modelled")
	fs.DurationVar(&c.findP90, "trace-find-p90", 0, "-trace: from -trace-rate up by 1.25x, find the rate where whole/least_loaded's TTFT p90 first exceeds this (2s: the goals' load), then run the rows there")
}

// resolve checks and reads the run's flags.
func (c *traceConfig) resolve() error {
	if c.file == "" {
		return nil
	}
	var err error
	if c.window, err = parseTraceWindow(c.windowFlag); err != nil {
		return err
	}
	if c.sizes, err = positiveInts("trace-sizes", c.sizesFlag); err != nil || len(c.sizes) == 0 {
		return fmt.Errorf("-trace-sizes: want engine counts, e.g. 4,16,64 (%v)", err)
	}
	if c.rows, err = pickTraceRows(c.rowsFlag); err != nil {
		return err
	}
	for _, p := range []string{c.profile, c.mixed} {
		if _, err := timing.ByName(p); err != nil {
			return fmt.Errorf("-trace-profile, -trace-mixed: %w", err)
		}
	}
	switch {
	case !(c.rate > 0):
		return fmt.Errorf("-trace-rate: want a positive number, got %v", c.rate)
	case c.ttft <= 0 || c.tpot <= 0:
		return fmt.Errorf("-trace-ttft and -trace-tpot: want positive durations")
	}
	return nil
}

// traceRow is one configuration the trace runs on.
type traceRow struct {
	name     string
	mode     string // whole or disagg
	policy   string
	replicas int  // Caddys in front, sharing through the cluster option when more than one
	mixed    bool // half the engines on the mixed profile
}

// traceRows are every row, in the order they run: what users choose
// between.
var traceRows = []traceRow{
	{name: "whole/round_robin", mode: "whole", policy: "round_robin", replicas: 1},
	{name: "whole/least_loaded", mode: "whole", policy: "least_loaded", replicas: 1},
	{name: "whole/prefix_aware", mode: "whole", policy: "prefix_aware", replicas: 1},
	{name: "whole/slo_aware", mode: "whole", policy: "slo_aware", replicas: 1},
	{name: "disagg/prefix_aware", mode: "disagg", policy: "prefix_aware", replicas: 1},
	{name: "disagg/least_loaded", mode: "disagg", policy: "least_loaded", replicas: 1},
	{name: "replicas-3/prefix_aware", mode: "whole", policy: "prefix_aware", replicas: 3},
	{name: "mixed/least_loaded", mode: "whole", policy: "least_loaded", replicas: 1, mixed: true},
	{name: "mixed/slo_aware", mode: "whole", policy: "slo_aware", replicas: 1, mixed: true},
}

func traceRowNames() []string {
	out := make([]string, len(traceRows))
	for i, r := range traceRows {
		out[i] = r.name
	}
	return out
}

// pickTraceRows is the rows spec names (all for ""), in their order.
func pickTraceRows(spec string) ([]traceRow, error) {
	if spec == "" {
		return traceRows, nil
	}
	want := splitList(spec)
	for _, w := range want {
		if !slices.Contains(traceRowNames(), w) {
			return nil, fmt.Errorf("-trace-rows: no row %q; the rows: %s", w, strings.Join(traceRowNames(), ", "))
		}
	}
	var out []traceRow
	for _, r := range traceRows {
		if slices.Contains(want, r.name) {
			out = append(out, r)
		}
	}
	return out, nil
}

// prefillShare is the part of a disagg row's engines that prefill: the
// trace's prompts are long and its answers short, so most of the work is
// prefill (Mooncake's own deployments run more prefill than decode
// nodes).
const prefillShare = 0.75

// split is how many of n engines prefill in a disagg row, at least one
// of each role.
func (r traceRow) split(n int) (prefill int) {
	return min(max(int(float64(n)*prefillShare+0.5), 1), n-1)
}

// profileOf is engine i's profile in a row of n engines.
func (r traceRow) profileOf(c *traceConfig, i int) string {
	if r.mixed && i%2 == 1 {
		return c.mixed
	}
	return c.profile
}

// handler is the row's mlc_router over engines. engine_timeout is the
// default's 15 s of modelled time.
func (r traceRow) handler(c *traceConfig, engines []string) string {
	timeout := "engine_timeout " + c.scale.wall(15*time.Second).String()
	// The engines' command line, which the router reads their context
	// from (it spawns none of them).
	args := "engine_args --timing " + c.profile
	if r.mode == "whole" {
		return mlcWhole(external(engines), "policy "+r.policy, timeout, args)
	}
	var b strings.Builder
	b.WriteString("mlc_router {\n\tmodel tiny\n\tmode disagg\n")
	prefill := r.split(len(engines))
	for i, e := range engines {
		role := "decode"
		if i < prefill {
			role = "prefill"
		}
		fmt.Fprintf(&b, "\tendpoint %s role %s external\n", e, role)
	}
	// Every request is disaggregated, as MLC's router does: the prefill
	// engine's choice is what the rows compare.
	fmt.Fprintf(&b, "\tpolicy %s\n\tmax_prefill_queue off\n\t%s\n\t%s\n}\n", r.policy, timeout, args)
	return b.String()
}

// runTrace replays the trace on every row and size, and prints the
// tables.
func (b *bench) runTrace(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	tc := &cfg.trace
	all, err := readTrace(tc.file)
	if err != nil {
		return err
	}
	reqs := tc.window.take(all)
	if len(reqs) == 0 {
		return fmt.Errorf("-trace-window %s holds no request of the trace", tc.windowFlag)
	}
	p, _ := timing.ByName(tc.profile)
	var sent []traceRequest
	for i := range reqs {
		reqs[i].tooLong = reqs[i].in+reqs[i].out > p.Model.Context
		if !reqs[i].tooLong {
			sent = append(sent, reqs[i])
		}
	}
	oracleShares(sent)
	for i, j := 0, 0; i < len(reqs); i++ {
		if !reqs[i].tooLong {
			reqs[i].reusable = sent[j].reusable
			j++
		}
	}
	b.prefixCache = "radix"
	calib, err := b.calibrate(ctx, tc)
	if err != nil {
		return err
	}
	var results, probes []traceResult
	if tc.findP90 > 0 {
		if probes, err = b.findLoad(ctx, tc, reqs); err != nil {
			return err
		}
	}
	for _, n := range tc.sizes {
		for _, row := range tc.rows {
			if i := slices.IndexFunc(probes, func(p traceResult) bool { return p.row == row && p.engines == n && p.rate == tc.rate }); i >= 0 {
				results = append(results, probes[i]) // the search's last probe
				continue
			}
			res, err := b.traceRow(ctx, tc, row, n, reqs)
			if err != nil {
				return fmt.Errorf("trace, %s on %d engines: %w", row.name, n, err)
			}
			load.sample()
			progressf("%s", res.summary())
			results = append(results, res)
		}
	}
	writeTrace(stdout, commandLine(args), tc, reqs, calib, probes, results, load, time.Since(started))
	if cfg.check {
		return checkTrace(calib, results)
	}
	return nil
}

// loadStep is how the search of -trace-find-p90 raises the rate.
const loadStep = 1.25

// findLoad raises tc.rate from its value until whole/least_loaded's TTFT
// p90 on the first size exceeds tc.findP90, and leaves it there. It
// returns every probe, the last at that rate.
func (b *bench) findLoad(ctx context.Context, tc *traceConfig, reqs []traceRequest) ([]traceResult, error) {
	row, _ := pickTraceRows("whole/least_loaded")
	var probes []traceResult
	for ; tc.rate <= 1000; tc.rate *= loadStep {
		res, err := b.traceRow(ctx, tc, row[0], tc.sizes[0], reqs)
		if err != nil {
			return nil, fmt.Errorf("trace, the load search at %gx: %w", tc.rate, err)
		}
		progressf("load search: %s", res.summary())
		probes = append(probes, res)
		if res.figures().ttft90 > tc.findP90 {
			return probes, nil
		}
	}
	return nil, fmt.Errorf("trace: whole/least_loaded's TTFT p90 stayed at most %v up to 1000x the trace's rate", tc.findP90)
}

// traceRow replays reqs on fresh engines and Caddys of row, n engines,
// and stops them after.
func (b *bench) traceRow(ctx context.Context, tc *traceConfig, row traceRow, n int, reqs []traceRequest) (traceResult, error) {
	mark := b.procs.count()
	defer func() { b.procs.stopLast(b.procs.count() - mark) }()
	logs := fmt.Sprintf("%s-%d-", strings.NewReplacer("/", "-").Replace(row.name), n)
	engines, procs, err := b.startEngineSet(ctx, engineSet{n: n, model: "tiny", world: row.mode == "disagg", logs: logs,
		args: func(i int) []string {
			return []string{"--timing", row.profileOf(tc, i), "--time-scale", strconv.FormatFloat(float64(tc.scale), 'g', -1, 64), "--eos-every", "0"}
		}})
	if err != nil {
		return traceResult{}, err
	}
	caddys, err := b.startRowCaddys(ctx, logs, row, row.handler(tc, engines))
	if err != nil {
		return traceResult{}, err
	}
	progressf("trace: %s on %d engines (%s), %d requests at %gx the trace's rate, time scale %g", row.name, n, fleetName(tc, row), len(reqs), tc.rate, tc.scale)
	before, err := readFleet(ctx, engines, procs, caddys)
	if err != nil {
		return traceResult{}, err
	}
	res := traceResult{row: row, engines: n, fleet: fleetName(tc, row), rate: tc.rate, ttft: tc.ttft, tpot: tc.tpot}
	t0 := time.Now()
	res.samples = replay(ctx, tc, caddys, reqs)
	res.wall = time.Since(t0)
	after, err := readFleet(ctx, engines, procs, caddys)
	if err != nil {
		return traceResult{}, err
	}
	res.fleetDelta = after.since(before)
	return res, ctx.Err()
}

// startRowCaddys starts the row's Caddys: one, or replicas sharing
// through a redis-server of the bench's own.
func (b *bench) startRowCaddys(ctx context.Context, logs string, row traceRow, handler string) ([]*caddyProc, error) {
	global := ""
	if row.replicas > 1 {
		redis, err := b.startRedis(ctx)
		if err != nil {
			return nil, err
		}
		global = clusterOption(redis, row.replicas)
	}
	var out []*caddyProc
	for i := range row.replicas {
		c, err := b.startCaddyWith(ctx, fmt.Sprintf("%scaddy%d", logs, i), global, handler, false)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// fleetName says what the row's engines model.
func fleetName(tc *traceConfig, row traceRow) string {
	if row.mixed {
		return tc.profile + " + " + tc.mixed
	}
	return tc.profile
}
