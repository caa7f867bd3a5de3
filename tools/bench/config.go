package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is the command line.
type config struct {
	caddy        string // a caddy binary with this module; built when empty
	rounds       int
	quick        bool
	concs        []int
	maxTokens    []int
	modes        []bool // stream off, on
	perClient    int    // requests per segment per concurrent client
	minRequests  int    // requests per segment at least
	promptLen    int
	seed         uint64
	idle         []int
	idleProtos   []string
	profileDir   string
	profileRows  []string
	profileSecs  int
	profileParty []string
	keep         bool

	// The fairness run (-fairness): tenant A floods, tenant B is served.
	fairness    bool
	check       bool // exit non-zero when a goal is missed
	flood       int  // A's streams in flight
	floodTokens int  // max_tokens of A's streams
	bStreams    int  // B's streams in flight when both flood
	samples     int  // measured requests per tenant and scenario, at least

	// Several replicas (issue 28): -replicas N Caddys sharing through a
	// redis-server the bench starts; -budgets measures a shared budget.
	replicas     int
	budgets      bool
	budgetLimit  int           // the tenant's tokens_per_minute
	budgetWindow time.Duration // how long the tenant sends

	// The goodput run (-slo, issue 30): latency targets, rising rate.
	slo      bool
	sloRates []float64
	sloStep  time.Duration

	// The structured-output run (-json, issue 43): time per output token
	// with a schema against without, one engine on jsonModel.
	json      bool
	jsonModel string
	// coverage: -json also serves the schema corpus
	// (internal/testkit/schemacorpus) and reports what it served.
	coverage bool

	// The agent sessions run (-agents, issue 44, agents.go): the rows to
	// run (empty: every one) and changes to the workload's shape.
	agents               bool
	agentRows, agentSize string
	// timing, when set, runs the agents' engines timed (--timing, with
	// the trace's -time-scale): a GPU's time instead of the CPU model's.
	timing string

	// The trace replay (-trace, tracerun.go): a trace file in the
	// Mooncake format, replayed on fleets of timed engines.
	trace traceConfig

	// The long-prompt run (-longprompt, issue 39, longprompt.go).
	longPrompt bool
	longTokens int // the long prompts' tokens; 0: the shape's
	longChunk  int // the engines' prefill_chunk_size; 0: longChunk
}

// quickDefaults replace the defaults of the flags not given when -quick is:
// a run that checks every part of the command in about a minute.
var quickDefaults = map[string]string{
	"rounds":        "1",
	"conc":          "1,16",
	"max-tokens":    "16",
	"per-client":    "2",
	"min-requests":  "8",
	"idle":          "200",
	"idle-proto":    "h1",
	"profile-secs":  "3",
	"profile-rows":  "c16-stream-16,c16-plain-16",
	"profile-party": "mlc_router",
	"flood":         "32",
	"flood-tokens":  "32",
	"b-streams":     "4",
	"samples":       "5",
	"budget-limit":  "6000",
	"budget-window": "10s",
	"slo-rates":     "5,10,15,20",
	"slo-step":      "8s",
	// -trace: one minute of the trace on 8 engines, twice as dense, on
	// the rows that show each part once.
	"trace-window": "1m",
	"trace-sizes":  "8",
	"trace-rate":   "2",
	"trace-rows":   "whole/least_loaded,whole/prefix_aware,disagg/prefix_aware,replicas-3/prefix_aware,mixed/slo_aware",
}

func parseConfig(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.caddy, "caddy", "", "caddy binary built with this module (default: go build ./xcaddy into the work directory)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every row for every party, interleaved")
	fs.BoolVar(&c.quick, "quick", false, "a short run (about a minute) that checks the command works")
	conc := fs.String("conc", "1,16,64", "concurrent clients of the rows")
	maxTok := fs.String("max-tokens", "16,64", "max_tokens of the rows")
	modes := fs.String("stream", "false,true", "streamed rows, non-streamed rows or both")
	fs.IntVar(&c.perClient, "per-client", 6, "requests per segment for each concurrent client")
	fs.IntVar(&c.minRequests, "min-requests", 32, "requests per segment at least")
	fs.IntVar(&c.promptLen, "prompt-len", 32, "prompt length in token ids")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the prompts")
	idle := fs.String("idle", "1000,10000", "idle streams to hold open through the router (empty: skip)")
	protos := fs.String("idle-proto", "h1,h2c", "client protocols of the idle streams: h1, h2c")
	fs.StringVar(&c.profileDir, "profile", "", "directory for CPU and allocation profiles of the router (empty: none)")
	rows := fs.String("profile-rows", "c16-stream-64,c16-plain-64", "rows to profile")
	fs.IntVar(&c.profileSecs, "profile-secs", 10, "seconds of each CPU profile")
	party := fs.String("profile-party", "mlc_router,disagg", "parties to profile: mlc_router, disagg, reverse_proxy")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (logs, Caddyfiles)")
	fs.BoolVar(&c.fairness, "fairness", false, "run the two-tenant contention instead (issue 23): one mlc_router, its gate on and off")
	fs.BoolVar(&c.check, "check", false, "-fairness: exit non-zero when a goal is missed")
	fs.IntVar(&c.flood, "flood", 64, "-fairness: tenant A's streams in flight")
	fs.IntVar(&c.floodTokens, "flood-tokens", 128, "-fairness: max_tokens of tenant A's streams")
	fs.IntVar(&c.bStreams, "b-streams", 8, "-fairness: tenant B's streams in flight when both flood (band 1)")
	fs.IntVar(&c.samples, "samples", 100, "-fairness: measured requests of each tenant per scenario, at least")
	fs.IntVar(&c.replicas, "replicas", 1, "-fairness, -budgets: Caddy replicas sharing the gate and budgets through a redis-server the bench starts (issue 28)")
	fs.BoolVar(&c.budgets, "budgets", false, "run the shared budget across replicas instead (issue 28): one tenant, spread over every replica")
	fs.IntVar(&c.budgetLimit, "budget-limit", 30000, "-budgets: the tenant's tokens_per_minute")
	fs.DurationVar(&c.budgetWindow, "budget-window", time.Minute, "-budgets: how long the tenant sends")
	fs.BoolVar(&c.agents, "agents", false, "run agent sessions instead (issue 44): a shared head, growing histories, tool time between turns; least_loaded, prefix_aware, round_robin")
	fs.BoolVar(&c.longPrompt, "longprompt", false, "run long prompts among short ones instead (issue 39): two slowed engines, a few prompts that take 3x engine_timeout to prefill, 32 clients of short ones")
	fs.IntVar(&c.longTokens, "long-tokens", 0, "-longprompt: the long prompts' tokens (default 12000; with -quick 3000)")
	fs.IntVar(&c.longChunk, "long-chunk", 0, "-longprompt: the engines' prefill_chunk_size (default 64)")
	fs.StringVar(&c.agentRows, "agents-rows", "", "-agents: the rows to run, comma-separated (default every one: "+strings.Join(agentRowNames(), ",")+")")
	fs.StringVar(&c.timing, "agents-timing", "", "-agents: run the engines timed with this profile (caddy mlc-engine --timing, e.g. h100-llama3-8b) and -time-scale; figures in modelled time")
	fs.StringVar(&c.agentSize, "agents-size", "", "-agents: changes to the workload, e.g. sessions=12,turns=6,shared=2000,own=250,tool=150,generate=40,toolmin=1s,toolmax=3s")
	c.trace.flags(fs)
	fs.BoolVar(&c.slo, "slo", false, "run the goodput comparison instead (issue 30): slo_aware against least_loaded, three engines one slower, rising rate")
	rates := fs.String("slo-rates", "4,8,12,16,20,24,28", "-slo: the request rates of the steps, requests a second, rising")
	fs.DurationVar(&c.sloStep, "slo-step", 20*time.Second, "-slo: how long each step sends")
	fs.BoolVar(&c.json, "json", false, "run the structured-output comparison instead (issue 43): time per output token with a JSON schema against without, one built-in engine")
	fs.StringVar(&c.jsonModel, "json-model", "", "-json: the model directory (tokenizer.json), e.g. Qwen3's; required with -json")
	fs.BoolVar(&c.coverage, "coverage", false, "-json: also serve the real-world schemas of internal/testkit/schemacorpus: the share served, the share valid, the time per token with a schema against without")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.quick {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range quickDefaults {
			if !given[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
			}
		}
	}
	var err error
	if err := c.trace.resolve(); err != nil {
		return nil, err
	}
	if c.sloRates, err = positiveFloats("slo-rates", *rates); err != nil {
		return nil, err
	}
	if c.concs, err = positiveInts("conc", *conc); err != nil {
		return nil, err
	}
	if c.maxTokens, err = positiveInts("max-tokens", *maxTok); err != nil {
		return nil, err
	}
	for _, s := range splitList(*modes) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("-stream: %q is not true or false", s)
		}
		if !slices.Contains(c.modes, b) {
			c.modes = append(c.modes, b)
		}
	}
	if c.idle, err = positiveInts("idle", *idle); err != nil {
		return nil, err
	}
	c.idleProtos = splitList(*protos)
	for _, p := range c.idleProtos {
		if p != "h1" && p != "h2c" {
			return nil, fmt.Errorf("-idle-proto: %q is not h1 or h2c", p)
		}
	}
	c.profileRows = splitList(*rows)
	c.profileParty = splitList(*party)
	for _, p := range c.profileParty {
		if !slices.Contains([]string{keyRouter, keyDisagg, keyProxy}, p) {
			return nil, fmt.Errorf("-profile-party: %q is not mlc_router, disagg or reverse_proxy", p)
		}
	}
	switch {
	case c.rounds < 1 || c.perClient < 1 || c.minRequests < 1 || c.promptLen < 1 || c.profileSecs < 1:
		return nil, fmt.Errorf("-rounds, -per-client, -min-requests, -prompt-len and -profile-secs must be positive")
	case c.longTokens < 0 || c.longTokens > 0 && !c.longPrompt || c.longChunk < 0 || c.longChunk > 0 && !c.longPrompt:
		return nil, fmt.Errorf("-long-tokens, -long-chunk: positive numbers, with -longprompt")
	case c.longPrompt && (c.fairness || c.budgets || c.slo || c.json || c.agents):
		return nil, fmt.Errorf("-longprompt is a run of its own")
	case c.trace.file != "" && (c.fairness || c.budgets || c.slo || c.json || c.agents || c.longPrompt):
		return nil, fmt.Errorf("-trace is a run of its own")
	case c.timing != "" && !c.agents:
		return nil, fmt.Errorf("-agents-timing goes with -agents")
	case !(c.trace.scale > 0) || c.trace.scale > 1000:
		return nil, fmt.Errorf("-time-scale: want a number above 0, at most 1000, got %v", c.trace.scale)
	case c.flood < 1 || c.floodTokens < 1 || c.bStreams < 1 || c.samples < 1:
		return nil, fmt.Errorf("-flood, -flood-tokens, -b-streams and -samples must be positive")
	case c.check && !c.fairness && !c.budgets && !c.slo && !c.json && !c.agents && !c.longPrompt && c.trace.file == "":
		return nil, fmt.Errorf("-check goes with -fairness, -budgets, -slo, -json, -agents, -longprompt or -trace")
	case c.coverage && !c.json:
		return nil, fmt.Errorf("-coverage goes with -json")
	case c.json && c.jsonModel == "":
		return nil, fmt.Errorf("-json needs -json-model, a model directory with tokenizer.json (Qwen3's for the issue's figure)")
	case c.fairness && c.budgets || c.slo && (c.fairness || c.budgets):
		return nil, fmt.Errorf("-fairness, -budgets and -slo are separate runs")
	case c.slo && c.sloStep <= 0:
		return nil, fmt.Errorf("-slo-step must be positive")
	case c.replicas < 1 || c.replicas > 1 && !c.fairness && !c.budgets:
		return nil, fmt.Errorf("-replicas: a positive number, above 1 only with -fairness or -budgets")
	case c.budgets && (c.replicas < 2 || c.budgetLimit < 1 || c.budgetWindow <= 0):
		return nil, fmt.Errorf("-budgets wants -replicas 2 or more, a positive -budget-limit and -budget-window")
	case len(c.modes) == 0:
		return nil, fmt.Errorf("-stream: want false, true or both")
	}
	return c, nil
}

// rows returns every row of the run, in the order they are measured.
func (c *config) rows() []row {
	var rows []row
	for _, conc := range c.concs {
		for _, stream := range c.modes {
			for _, mt := range c.maxTokens {
				rows = append(rows, row{conc: conc, stream: stream, maxTokens: mt})
			}
		}
	}
	return rows
}

// requests is the size of one segment of a row: every client sends
// perClient requests, so the engines' batches are full for most of it.
func (c *config) requests(r row) int { return max(c.minRequests, c.perClient*r.conc) }

// row is one load shape: every party is measured on it.
type row struct {
	conc      int
	stream    bool
	maxTokens int
}

// name is how flags and profile files name the row: c16-stream-64.
func (r row) name() string {
	kind := "plain"
	if r.stream {
		kind = "stream"
	}
	return fmt.Sprintf("c%d-%s-%d", r.conc, kind, r.maxTokens)
}

// title is the row in a table caption.
func (r row) title() string {
	kind := "not streamed"
	if r.stream {
		kind = "streamed"
	}
	return fmt.Sprintf("concurrency %d, %s, max_tokens %d", r.conc, kind, r.maxTokens)
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func positiveFloats(name, s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0) {
			return nil, fmt.Errorf("-%s: %q is not a positive number", name, f)
		}
		out = append(out, x)
	}
	return out, nil
}

func positiveInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Timeouts of the bench's own calls. Every network call has one.
const (
	requestTimeout = 2 * time.Minute  // one measured request, whole
	startTimeout   = 60 * time.Second // a process until it answers
	probeTimeout   = time.Second      // one readiness probe
	adminTimeout   = 10 * time.Second // one call to a Caddy admin endpoint
	stopGrace      = 5 * time.Second  // SIGTERM to SIGKILL
)
