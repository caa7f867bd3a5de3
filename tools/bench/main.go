// Command bench measures mlc_router side by side with what it is held to:
// the engines straight (split between them, and one alone), Caddy's
// reverse_proxy, and mlc_router in both modes, in one run, interleaved.
// It starts every party itself: two built-in engines in one NVSHMEM
// world, and a Caddy for each of reverse_proxy, mlc_router round_robin and
// mlc_router disagg, all with the engines external. Then it holds idle
// streams open through mlc_router to weigh each, and on request profiles
// the router's CPU. Tables go to stdout (markdown), progress to stderr.
//
//	go run ./tools/bench -quick          # about a minute
//	go run ./tools/bench -profile /tmp/prof
//
// -fairness runs the two-tenant contention of issue 23 instead (see
// fairness.go): one tenant floods, the other's time to first token is
// measured, on a router with its admission gate and on one without.
//
//	go run ./tools/bench -fairness -quick   # seconds
//	go run ./tools/bench -fairness          # about a minute; -check fails on a missed goal
//
// With -replicas N (issue 28, replicas.go), -fairness runs N Caddys
// sharing their gates through a redis-server of the bench's own, against
// the same N without sharing; -budgets measures one tenant's budget
// spread over N sharing replicas (budgets.go).
//
//	go run ./tools/bench -fairness -replicas 3 -quick
//	go run ./tools/bench -budgets -replicas 3 -quick   # about 30 s
//
// -slo runs the goodput comparison of issue 30 (slo.go): slo_aware
// against least_loaded on three engines, one slower, the rate rising in
// steps; -check fails on a missed goal.
//
//	go run ./tools/bench -slo -quick        # about two minutes
//	go run ./tools/bench -slo
//
// -longprompt runs the long prompts of issue 39 (longprompt.go): a few
// prompts that take three times engine_timeout to prefill among 32
// clients of short ones; it fails when a long one is not answered
// exactly in one attempt, kept alive, or an engine is blamed, and with
// -check when the short ones' TTFT p99 more than doubles.
//
//	go run ./tools/bench -longprompt -quick   # under a minute
//	go run ./tools/bench -longprompt -check   # the sizes: a few minutes
//
// See README.md beside this file for the figures and what they mean.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// logger reports the panics the bench's goroutines recover from.
var logger = newLogger()

func newLogger() *zap.Logger {
	cfg := zap.NewDevelopmentConfig()
	cfg.Level.SetLevel(zap.WarnLevel)
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "bench: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) (err error) {
	cfg, err := parseConfig(args, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fileLimit, err := raiseFileLimit()
	if err != nil {
		return fmt.Errorf("file limit: %w", err)
	}
	work, err := os.MkdirTemp("", "caddy-mlc-bench-")
	if err != nil {
		return err
	}
	b := &bench{work: work, caddyBin: cfg.caddy}
	defer func() {
		b.procs.stopAll()
		if err != nil || cfg.keep {
			progressf("work directory (logs, Caddyfiles) kept: %s", work)
		} else {
			_ = os.RemoveAll(work)
		}
	}()
	load := &loadWatch{}
	load.sample()
	started := time.Now()
	if b.caddyBin == "" {
		progressf("building caddy (./xcaddy)")
		if err := b.buildCaddy(ctx); err != nil {
			return err
		}
	}
	if cfg.fairness {
		return b.runFairness(ctx, cfg, args, stdout, load, started)
	}
	if cfg.budgets {
		return b.runBudgets(ctx, cfg, args, stdout, load, started)
	}
	if cfg.slo {
		return b.runSLO(ctx, cfg, args, stdout, load, started)
	}
	if cfg.json {
		return b.runJSON(ctx, cfg, args, stdout, load, started)
	}
	if cfg.agents {
		return b.runAgents(ctx, cfg, args, stdout, load, started)
	}
	if cfg.longPrompt {
		return b.runLongPrompt(ctx, cfg, args, stdout, load, started)
	}
	if cfg.trace.file != "" {
		return b.runTrace(ctx, cfg, args, stdout, load, started)
	}
	engines, err := b.startEngines(ctx, 2)
	if err != nil {
		return err
	}
	proxy, err := b.startCaddy(ctx, keyProxy, reverseProxy(engines), false)
	if err != nil {
		return err
	}
	router, err := b.startCaddy(ctx, keyRouter, mlcRouter(engines, ""), false)
	if err != nil {
		return err
	}
	disagg, err := b.startCaddy(ctx, keyDisagg, mlcDisagg(engines[0], engines[1]), false)
	if err != nil {
		return err
	}
	parties := tracked(engines, proxy, router, disagg)
	for _, p := range parties {
		if err := p.waitServing(ctx); err != nil {
			return err
		}
	}
	if err := verify(ctx, parties, cfg.seed, cfg.promptLen); err != nil {
		return err
	}
	progressf("every party gives one engine's greedy text; measuring (engines %s, work directory %s)", strings.Join(engines, ", "), work)
	rows, err := measureRows(ctx, cfg, parties, engines, load)
	if err != nil {
		return err
	}
	var profiles []string
	if cfg.profileDir != "" {
		if profiles, err = profileRows(ctx, cfg, parties); err != nil {
			return err
		}
	}
	// The idle streams need neither the engines nor their Caddys.
	b.procs.stopAll()
	idle, err := b.measureIdle(ctx, cfg, fileLimit)
	if err != nil {
		return err
	}
	load.sample()
	writeHeader(stdout, args, load, time.Since(started))
	writeCompact(stdout, rows)
	writeSummary(stdout, rows)
	writeIdle(stdout, idle, fileLimit)
	fmt.Fprintln(stdout, "\n#### Every row")
	for _, rr := range rows {
		writeRow(stdout, rr)
	}
	for _, line := range profiles {
		fmt.Fprintf(stdout, "\n%s\n", line)
	}
	return nil
}

// writeHeader says what ran where: the command, the machine, its load.
func writeHeader(w io.Writer, args []string, load *loadWatch, took time.Duration) {
	fmt.Fprintf(w, "### Router benchmark, %s\n\n", time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s; the bench, the engines and the Caddys share them.\n",
		commandLine(args), took.Round(time.Second), commit(), runtime.NumCPU(), load)
	fmt.Fprintln(w, "Latency is from sending the request to the end of the answer; TTFT to the first event; a gap is the time between two events of a stream. Caddy CPU is the time the party's Caddy threads spent on a CPU (/proc/<pid>/task/*/schedstat; utime+stime where the kernel keeps no schedstat) over its own segments, per request; allocations come from its Go runtime (/debug/vars).")
}

// commandLine is the command that ran, as a user would type it.
func commandLine(args []string) string {
	cmd := "go run ./tools/bench"
	for _, a := range args {
		cmd += " " + shellQuote(a)
	}
	return cmd
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=,./:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commit is the checkout's commit, when git can say.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// writeIdle prints the idle-stream table.
func writeIdle(w io.Writer, results []idleResult, fileLimit uint64) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### Idle streams (goal: ≤ 100 KiB each through mlc_router)\n\n")
	fmt.Fprintf(w, "A stub engine sends one chunk and holds each stream; memory after a garbage collection, before and with the streams open. Open-file limit %d: over HTTP/1.1 a stream holds 2 descriptors in Caddy and 2 in the bench (client and stub), over h2c about 1 in each.\n\n", fileLimit)
	fmt.Fprintln(w, "| party | streams | client | Caddy RSS before MiB | with streams MiB | RSS KiB/stream | Go heap KiB/stream | Go stacks KiB/stream | goroutines/stream | fds/stream | errors |")
	fmt.Fprintln(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		if r.skipped != "" {
			fmt.Fprintf(w, "| %s | %d | %s | skipped: %s | | | | | | | |\n", r.label, r.streams, r.proto, r.skipped)
			continue
		}
		n := float64(max(r.opened, 1))
		perStream := func(before, with uint64) float64 { return float64(int64(with)-int64(before)) / 1024 / n }
		errs := fmt.Sprint(r.errors)
		if r.firstErr != nil {
			errs += fmt.Sprintf(" (%.80s)", r.firstErr.Error())
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n", r.label, r.opened, r.proto,
			float64(r.before.rss)/(1<<20), float64(r.with.rss)/(1<<20), float64(r.with.rss-r.before.rss)/1024/n,
			perStream(r.before.heapInuse, r.with.heapInuse), perStream(r.before.stackInuse, r.with.stackInuse), float64(r.goroutines[1]-r.goroutines[0])/n, float64(r.with.fds-r.before.fds)/n, errs)
	}
}
