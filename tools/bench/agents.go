package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
)

// The agent sessions run (issue 44): sessions that resend a head shared
// by all, a head of their own and a history that grows by a tool result
// each turn, with tool time between turns, on built-in engines with their
// prefix caches on, each engine's KV cache sized to hold the shared head
// and about a third of the sessions. The rows: mode whole under each
// policy; disagg with one prefill and two decode engines, and with two
// and two, the prefill engine chosen by its cache (prefix_aware) or by
// load alone (least_loaded); and three Caddy replicas with the cluster
// option in front of the same three engines. Reported per turn index:
// time to first token p50/p99, the share of prompt tokens the engines
// said they reused (usage.prompt_tokens_details.cached_tokens) against
// the ideal share (every token but the turn's new ones); per row, the
// prompt tokens the engines computed (mlc_engine_prefill_tokens_total)
// and the throughput.

// agentShape is the workload's size.
type agentShape struct {
	sessions, turns                 int
	sharedHead, ownHead, toolResult int // tokens
	generate                        int
	toolMin, toolMax                time.Duration
}

// agentShapes: the issue's, and -quick's, scaled to run in about two
// minutes on two cores.
var (
	fullAgents  = agentShape{24, 12, 6000, 500, 300, 80, time.Second, 3 * time.Second}
	quickAgents = agentShape{6, 5, 800, 120, 60, 12, 100 * time.Millisecond, 300 * time.Millisecond}
)

// resized is the shape with the changes of -agents-size applied
// ("sessions=12,turns=6,shared=2000,own=250,tool=150,generate=40,
// toolmin=1s,toolmax=3s", any of them).
func (s agentShape) resized(spec string) (agentShape, error) {
	ints := map[string]*int{"sessions": &s.sessions, "turns": &s.turns, "shared": &s.sharedHead, "own": &s.ownHead, "tool": &s.toolResult, "generate": &s.generate}
	durs := map[string]*time.Duration{"toolmin": &s.toolMin, "toolmax": &s.toolMax}
	for _, kv := range splitList(spec) {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch {
		case ints[k] != nil:
			*ints[k], err = strconv.Atoi(v)
		case durs[k] != nil:
			*durs[k], err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return s, fmt.Errorf("-agents-size %q: %v", kv, err)
		}
	}
	if s.sessions < 1 || s.turns < 1 || s.sharedHead < 0 || s.ownHead < 1 || s.toolResult < 1 || s.generate < 1 || s.toolMin < 0 || s.toolMax < s.toolMin {
		return s, fmt.Errorf("-agents-size: sessions, turns, own, tool and generate must be positive, shared not negative, 0 <= toolmin <= toolmax")
	}
	return s, nil
}

// kvTokens is each engine's KV capacity: the shared head and a third of
// the sessions at their longest, with a tenth more for the turns in
// flight, in whole pages of 16 tokens.
func (s agentShape) kvTokens() int {
	session := s.ownHead + (s.turns-1)*s.toolResult + s.generate
	n := (s.sharedHead + (s.sessions+2)/3*session) * 11 / 10
	return (n + 15) / 16 * 16
}

// agentRow is one configuration the sessions run on.
type agentRow struct {
	name     string
	mode     string // whole or disagg
	policy   string
	prefill  int // disagg: prefill engines, then decode engines
	decode   int
	replicas int // Caddys sharing the engines, through the cluster option when more than one
	// sessions: each session names itself (prompt_cache_key), and its
	// turns go back to the engine of its last (the router's sessions).
	sessions bool
}

// agentRows are every row, in the order they run.
var agentRows = []agentRow{
	{name: "whole/least_loaded", mode: "whole", policy: "least_loaded", replicas: 1},
	{name: "whole/prefix_aware", mode: "whole", policy: "prefix_aware", replicas: 1},
	{name: "whole/round_robin", mode: "whole", policy: "round_robin", replicas: 1},
	{name: "disagg-1p2d/prefix_aware", mode: "disagg", policy: "prefix_aware", prefill: 1, decode: 2, replicas: 1},
	{name: "disagg-2p2d/prefix_aware", mode: "disagg", policy: "prefix_aware", prefill: 2, decode: 2, replicas: 1},
	{name: "disagg-2p2d/least_loaded", mode: "disagg", policy: "least_loaded", prefill: 2, decode: 2, replicas: 1},
	{name: "replicas-3/prefix_aware", mode: "whole", policy: "prefix_aware", replicas: 3},
	{name: "whole/sessions", mode: "whole", policy: "least_loaded", replicas: 1, sessions: true},
	{name: "disagg-2p2d/sessions", mode: "disagg", policy: "least_loaded", prefill: 2, decode: 2, replicas: 1, sessions: true},
	{name: "replicas-3/sessions", mode: "whole", policy: "least_loaded", replicas: 3, sessions: true},
}

func agentRowNames() []string {
	out := make([]string, len(agentRows))
	for i, r := range agentRows {
		out[i] = r.name
	}
	return out
}

// pickAgentRows is the rows -agents-rows names, in the order they run.
func pickAgentRows(spec string) ([]agentRow, error) {
	if spec == "" {
		return agentRows, nil
	}
	want := splitList(spec)
	for _, w := range want {
		if !slices.Contains(agentRowNames(), w) {
			return nil, fmt.Errorf("-agents-rows: no row %q; the rows: %s", w, strings.Join(agentRowNames(), ", "))
		}
	}
	var out []agentRow
	for _, r := range agentRows {
		if slices.Contains(want, r.name) {
			out = append(out, r)
		}
	}
	return out, nil
}

// engines is how many engines the row runs.
func (r agentRow) engines() int {
	if r.mode == "disagg" {
		return r.prefill + r.decode
	}
	return 3
}

// handler is the row's mlc_router over engines.
func (r agentRow) handler(engines []string) string {
	if r.mode == "whole" {
		return mlcWhole(external(engines), "policy "+r.policy, "prefix_cache radix")
	}
	var b strings.Builder
	b.WriteString("mlc_router {\n\tmodel tiny\n\tmode disagg\n\tprefix_cache radix\n")
	for i, e := range engines {
		role := "decode"
		if i < r.prefill {
			role = "prefill"
		}
		fmt.Fprintf(&b, "\tendpoint %s role %s external\n", e, role)
	}
	// Every request is disaggregated, as MLC's router does: the prefill
	// engine's choice is what the rows compare.
	fmt.Fprintf(&b, "\tpolicy %s\n\tmax_prefill_queue off\n}\n", r.policy)
	return b.String()
}

// agentClock is the agents' engines' clock: real (scale 1, no profile),
// or a timed fleet's, whose figures are modelled time and whose tool
// times run scale times slower too.
type agentClock struct {
	profile string
	timeScale
}

// agentTurn is what one turn of one session measured.
type agentTurn struct {
	ttft           time.Duration
	prompt, cached int
	newTokens      int
	generated      int
	err            error
}

// agentResult is a row's run: turns by index, prompt tokens computed,
// wall time.
type agentResult struct {
	row      agentRow
	turns    [][]agentTurn
	computed float64
	// preemptions are the engines' (a preempted sequence is prefilled
	// again, which its usage does not count).
	preemptions float64
	wall        time.Duration
}

func (b *bench) runAgents(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	shape := fullAgents
	if cfg.quick {
		shape = quickAgents
	}
	shape, err := shape.resized(cfg.agentSize)
	if err != nil {
		return err
	}
	rows, err := pickAgentRows(cfg.agentRows)
	if err != nil {
		return err
	}
	b.prefixCache = "radix"
	b.engineArgs = []string{"--overrides", fmt.Sprintf("max_total_seq_length=%d", shape.kvTokens())}
	clock := agentClock{timeScale: 1}
	if cfg.timing != "" {
		if _, err := timing.ByName(cfg.timing); err != nil {
			return fmt.Errorf("-agents-timing: %w", err)
		}
		clock = agentClock{profile: cfg.timing, timeScale: cfg.trace.scale}
		b.engineArgs = append(b.engineArgs, "--timing", cfg.timing, "--time-scale", strconv.FormatFloat(float64(clock.timeScale), 'g', -1, 64), "--eos-every", "0")
	}
	var results []agentResult
	for _, row := range rows {
		res, err := b.agentRow(ctx, shape, row, clock)
		if err != nil {
			return fmt.Errorf("agents, %s: %w", row.name, err)
		}
		results = append(results, res)
	}
	load.sample()
	writeAgents(stdout, commandLine(args), shape, clock, results, load, time.Since(started))
	if cfg.check {
		return checkAgents(results)
	}
	return nil
}

// agentRow runs the sessions on fresh engines and Caddys of row, and
// stops them after.
func (b *bench) agentRow(ctx context.Context, shape agentShape, row agentRow, clock agentClock) (agentResult, error) {
	mark := b.procs.count()
	defer func() { b.procs.stopLast(b.procs.count() - mark) }()
	engines, err := b.startEngines(ctx, row.engines())
	if err != nil {
		return agentResult{}, err
	}
	global := ""
	if row.replicas > 1 {
		redis, err := b.startRedis(ctx)
		if err != nil {
			return agentResult{}, err
		}
		global = clusterOption(redis, row.replicas)
	}
	var bases []string
	var caddys []*caddyProc
	for i := range row.replicas {
		name := fmt.Sprintf("agents-%s-%d", strings.NewReplacer("/", "-").Replace(row.name), i)
		caddy, err := b.startCaddyWith(ctx, name, global, row.handler(engines), false)
		if err != nil {
			return agentResult{}, err
		}
		bases, caddys = append(bases, caddy.base), append(caddys, caddy)
	}
	if err := sharing(ctx, caddys); err != nil {
		return agentResult{}, err
	}
	progressf("agents: %d sessions of %d turns, %s (KV %d tokens an engine)", shape.sessions, shape.turns, row.name, shape.kvTokens())
	before, preBefore, err := engineCounts(ctx, engines)
	if err != nil {
		return agentResult{}, err
	}
	res := agentResult{row: row, turns: make([][]agentTurn, shape.turns)}
	t0 := time.Now()
	if err := runSessions(ctx, bases, shape, clock, row.sessions, &res); err != nil {
		return agentResult{}, err
	}
	res.wall = clock.modelled(time.Since(t0))
	after, preAfter, err := engineCounts(ctx, engines)
	if err != nil {
		return agentResult{}, err
	}
	res.computed, res.preemptions = after-before, preAfter-preBefore
	return res, nil
}

// sharing waits until the replicas hear one another: a replica hears
// only what is published once its subscription is up, which its
// answering does not say. It routes probe sessions (three tokens each)
// through the first until every other has taken one in.
func sharing(ctx context.Context, caddys []*caddyProc) error {
	client := &http.Client{Timeout: time.Minute}
	deadline := time.Now().Add(time.Minute)
	for probe := 0; len(caddys) > 1; probe++ {
		heard := true
		for _, c := range caddys[1:] {
			body, err := getBody(ctx, c.admin+"/metrics")
			if err != nil {
				return err
			}
			n, _ := counterValue(body, "caddy_mlc_session_events_applied_total")
			heard = heard && n > 0
		}
		if heard {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replicas heard none of %d probe sessions in a minute", probe)
		}
		if t := agentCall(ctx, client, caddys[0].base, []int{5, 6, 7}, 1, fmt.Sprintf("probe-%d", probe)); t.err != nil {
			return t.err
		}
		select {
		case <-time.After(100 * time.Millisecond): // the others are other processes: polled
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// count is how many children are running.
func (ps *procs) count() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.list)
}

// stopLast stops the n children started last, the last first.
func (ps *procs) stopLast(n int) {
	ps.mu.Lock()
	list := ps.list[max(len(ps.list)-n, 0):]
	ps.list = ps.list[:len(ps.list)-len(list)]
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// engineCounts are the engines' prompt tokens computed and preemptions,
// each summed over them.
func engineCounts(ctx context.Context, engines []string) (prefill, preemptions float64, err error) {
	for _, e := range engines {
		body, err := getBody(ctx, "http://"+e+"/metrics")
		if err != nil {
			return 0, 0, err
		}
		n, err := counterValue(body, "mlc_engine_prefill_tokens_total")
		if err != nil {
			return 0, 0, fmt.Errorf("%s/metrics: %w", e, err)
		}
		p, err := counterValue(body, "mlc_engine_preemptions_total")
		if err != nil {
			return 0, 0, fmt.Errorf("%s/metrics: %w", e, err)
		}
		prefill, preemptions = prefill+n, preemptions+p
	}
	return prefill, preemptions, nil
}

// agentTokens are n token ids of the tiny model's vocabulary, the same
// for the same seed.
func agentTokens(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 44))
	out := make([]int, n)
	for i := range out {
		out[i] = 3 + r.IntN(1200)
	}
	return out
}

// runSessions runs every session to its last turn, together, session k
// on the Caddys at bases in turn, from bases[k mod len(bases)] (each
// turn at the next, as a load balancer without affinity sends them);
// with keyed, each names itself by prompt_cache_key. Times are the
// clock's modelled ones.
func runSessions(ctx context.Context, bases []string, shape agentShape, clock agentClock, keyed bool, res *agentResult) error {
	head := agentTokens(1, shape.sharedHead)
	client := &http.Client{Timeout: 5 * time.Minute}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, shape.sessions)
	for k := range shape.sessions {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[k] = fmt.Errorf("session %d: panic: %v", k, p)
				}
			}()
			r := rand.New(rand.NewPCG(uint64(k), 7))
			prompt := append(slices.Clone(head), agentTokens(uint64(100+k), shape.ownHead)...)
			for turn := range shape.turns {
				// The first turn's new tokens are the session's own head: the
				// shared head is every session's, computed once an engine.
				added := shape.ownHead
				if turn > 0 {
					added = shape.toolResult
					prompt = append(prompt, agentTokens(uint64(10000+k*100+turn), shape.toolResult)...)
				}
				key := ""
				if keyed {
					key = fmt.Sprintf("agent-session-%d", k)
				}
				t := agentCall(ctx, client, bases[(k+turn)%len(bases)], prompt, shape.generate, key)
				t.newTokens = added
				t.ttft = clock.modelled(t.ttft)
				mu.Lock()
				res.turns[turn] = append(res.turns[turn], t)
				mu.Unlock()
				if t.err != nil {
					errs[k] = t.err
					return
				}
				tool := shape.toolMin + time.Duration(r.Int64N(int64(shape.toolMax-shape.toolMin)+1))
				select {
				case <-time.After(clock.wall(tool)):
				case <-ctx.Done():
					errs[k] = ctx.Err()
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// agentCall streams one turn, of the session key names ("": none), and
// measures its time to first token and the usage's cached tokens.
func agentCall(ctx context.Context, client *http.Client, base string, prompt []int, generate int, key string) agentTurn {
	req := map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": generate, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true}}
	if key != "" {
		req["prompt_cache_key"] = key
	}
	body, _ := json.Marshal(req)
	resp, t0, err := postCompletion(ctx, client, base, body, nil)
	if err != nil {
		return agentTurn{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return agentTurn{err: answerError(resp)}
	}
	var t agentTurn
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Error   *struct{ Message, Type, Code string }
			Choices []struct{ Text string }
			Usage   *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return agentTurn{err: fmt.Errorf("%w: %.200s", err, data)}
		}
		if chunk.Error != nil {
			return agentTurn{err: fmt.Errorf("error event: %s (%s, %s)", chunk.Error.Message, chunk.Error.Type, chunk.Error.Code)}
		}
		if t.ttft == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			t.ttft = time.Since(t0)
		}
		if u := chunk.Usage; u != nil {
			t.prompt, t.generated = u.PromptTokens, u.CompletionTokens
			if u.PromptTokensDetails != nil {
				t.cached = u.PromptTokensDetails.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		return agentTurn{err: err}
	}
	if t.prompt == 0 {
		return agentTurn{err: fmt.Errorf("no usage in the stream (%d prompt tokens, first token after %v)", len(prompt), t.ttft)}
	}
	return t
}

// turnFigures are one turn index's figures of a row's run.
type turnFigures struct {
	p50, p99      time.Duration
	cached, ideal float64 // shares of the prompt tokens
	computed      int     // prompt tokens the engines said they did not reuse
}

func figuresOf(turns []agentTurn) turnFigures {
	var ttfts []time.Duration
	var prompt, cached, ideal float64
	computed := 0
	for _, t := range turns {
		ttfts = append(ttfts, t.ttft)
		prompt += float64(t.prompt)
		cached += float64(t.cached)
		ideal += float64(t.prompt - t.newTokens)
		computed += t.prompt - t.cached
	}
	return turnFigures{p50: percentile(ttfts, 0.50), p99: percentile(ttfts, 0.99), cached: div(cached, prompt), ideal: div(ideal, prompt), computed: computed}
}

// later are a run's turns after the first, together.
func (r agentResult) later() []agentTurn {
	var out []agentTurn
	for _, ts := range r.turns[1:] {
		out = append(out, ts...)
	}
	return out
}

// throughput is the run's requests and generated tokens a second.
func (r agentResult) throughput() (requests, tokens float64) {
	n, g := 0, 0
	for _, ts := range r.turns {
		for _, t := range ts {
			n++
			g += t.generated
		}
	}
	return float64(n) / r.wall.Seconds(), float64(g) / r.wall.Seconds()
}

func writeAgents(w io.Writer, command string, shape agentShape, clock agentClock, results []agentResult, load *loadWatch, took time.Duration) {
	fmt.Fprintf(w, "\n### Agent sessions: %d sessions of %d turns, head %d shared + %d own, +%d a turn, %d generated, tool time %v-%v; KV %d tokens an engine\n\n",
		shape.sessions, shape.turns, shape.sharedHead, shape.ownHead, shape.toolResult, shape.generate, shape.toolMin, shape.toolMax, shape.kvTokens())
	if clock.profile != "" {
		fmt.Fprintf(w, "Timed engines (%s), time scale %g: every time and rate is modelled.\n\n", clock.profile, float64(clock.timeScale))
	}
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s; the bench, the engines and the Caddys share them.\n\n", command, took.Round(time.Second), commit(), runtime.NumCPU(), load)
	fmt.Fprintln(w, "| row | turn | TTFT p50 ms | TTFT p99 ms | cached share | ideal share | prompt tokens computed |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: | --: |")
	for _, r := range results {
		for i, ts := range r.turns {
			f := figuresOf(ts)
			fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.0f%% | %.0f%% | %d |\n", r.row.name, i+1, ms(f.p50), ms(f.p99), 100*f.cached, 100*f.ideal, f.computed)
		}
	}
	fmt.Fprintln(w, "\n| row | TTFT p50 ms, turns 2+ | TTFT p99 ms, turns 2+ | cached share, turns 2+ (ideal) | prompt tokens computed, turns 2+ | all turns: usages · engines | engines' preemptions | requests/s | generated tokens/s | wall s |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: |")
	for _, r := range results {
		f := figuresOf(r.later())
		all := 0
		for _, ts := range r.turns {
			all += figuresOf(ts).computed
		}
		req, tok := r.throughput()
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f%% (%.1f%%) | %d | %d · %.0f | %.0f | %.2f | %.1f | %.1f |\n", r.row.name, ms(f.p50), ms(f.p99), 100*f.cached, 100*f.ideal, f.computed, all, r.computed, r.preemptions, req, tok, r.wall.Seconds())
	}
}

// checkAgents holds the run to the goals, each where its rows
// ran: whole/prefix_aware's time to first token p50 over the turns after
// the first at most 0.3x whole/least_loaded's; a cached share over those
// turns at least 85% of the ideal in whole (prefix_aware) and in disagg
// (the prefix_aware rows); three replicas at least 0.9x one's requests a
// second (whole/prefix_aware), their cached share within 5 points; and
// disagg with the prefill engine chosen by its cache computing at most
// half the prompt tokens of disagg with the choice by load.
func checkAgents(results []agentResult) error {
	by := map[string]agentResult{}
	for _, r := range results {
		by[r.row.name] = r
	}
	var missed []string
	pa, okPA := by["whole/prefix_aware"]
	if ll, ok := by["whole/least_loaded"]; ok && okPA {
		p, l := figuresOf(pa.later()).p50, figuresOf(ll.later()).p50
		if float64(p) > 0.3*float64(l) {
			missed = append(missed, fmt.Sprintf("whole/prefix_aware TTFT p50 %.1f ms is over 0.3x whole/least_loaded's %.1f ms (%.2fx)", ms(p), ms(l), float64(p)/float64(l)))
		}
	}
	for _, name := range []string{"whole/prefix_aware", "disagg-1p2d/prefix_aware", "disagg-2p2d/prefix_aware"} {
		r, ok := by[name]
		if !ok {
			continue
		}
		if f := figuresOf(r.later()); f.cached < 0.85*f.ideal {
			missed = append(missed, fmt.Sprintf("%s cached share %.1f%% is under 85%% of the ideal %.1f%% (%.2f)", name, 100*f.cached, 100*f.ideal, f.cached/f.ideal))
		}
	}
	if rep, ok := by["replicas-3/prefix_aware"]; ok && okPA {
		one, _ := pa.throughput()
		three, _ := rep.throughput()
		if three < 0.9*one {
			missed = append(missed, fmt.Sprintf("three replicas serve %.2f requests/s, under 0.9x one's %.2f", three, one))
		}
		c1, c3 := figuresOf(pa.later()).cached, figuresOf(rep.later()).cached
		if math.Abs(c3-c1) > 0.05 {
			missed = append(missed, fmt.Sprintf("three replicas' cached share %.1f%% is more than 5 points from one's %.1f%%", 100*c3, 100*c1))
		}
	}
	cache, okC := by["disagg-2p2d/prefix_aware"]
	if loadOnly, ok := by["disagg-2p2d/least_loaded"]; ok && okC && cache.computed > 0.5*loadOnly.computed {
		c, l := figuresOf(cache.later()).computed, figuresOf(loadOnly.later()).computed
		missed = append(missed, fmt.Sprintf("disagg with cache-aware prefill computed %.0f prompt tokens, over half of load-only's %.0f (%.2fx; turns 2+: %d against %d, %.2fx)",
			cache.computed, loadOnly.computed, cache.computed/loadOnly.computed, c, l, float64(c)/float64(max(l, 1))))
	}
	if len(missed) > 0 {
		return fmt.Errorf("agents: goals missed: %s", strings.Join(missed, "; "))
	}
	return nil
}
