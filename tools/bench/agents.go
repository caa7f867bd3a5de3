package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The agent sessions run (issue 44): sessions that resend a head shared
// by all, a head of their own and a history that grows by a tool result
// each turn, with tool time between turns, on three built-in engines with
// their prefix caches on, under each policy in mode whole. Reported per
// turn index: time to first token p50/p99, the share of prompt tokens the
// engines said they reused (usage.prompt_tokens_details.cached_tokens)
// against the ideal share (every token but the turn's new ones), and the
// prompt tokens the engines computed (mlc_engine_prefill_tokens_total).

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

// agentTurn is what one turn of one session measured.
type agentTurn struct {
	ttft           time.Duration
	prompt, cached int
	newTokens      int
	err            error
}

// agentResult is a policy's run: turns by index, prompt tokens computed,
// wall time.
type agentResult struct {
	policy   string
	turns    [][]agentTurn
	computed float64
	wall     time.Duration
}

func (b *bench) runAgents(ctx context.Context, cfg *config, stdout io.Writer) error {
	shape := fullAgents
	if cfg.quick {
		shape = quickAgents
	}
	b.prefixCache = "radix"
	var results []agentResult
	for _, policy := range []string{"least_loaded", "prefix_aware", "round_robin"} {
		engines, err := b.startEngines(ctx, 3)
		if err != nil {
			return err
		}
		caddy, err := b.startCaddy(ctx, "agents-"+policy, mlcWhole(external(engines), "policy "+policy), false)
		if err != nil {
			return err
		}
		progressf("agents: %d sessions of %d turns, policy %s", shape.sessions, shape.turns, policy)
		before, err := prefillTokens(ctx, engines)
		if err != nil {
			return err
		}
		res := agentResult{policy: policy, turns: make([][]agentTurn, shape.turns)}
		t0 := time.Now()
		if err := runSessions(ctx, caddy.base, shape, &res); err != nil {
			return err
		}
		res.wall = time.Since(t0)
		after, err := prefillTokens(ctx, engines)
		if err != nil {
			return err
		}
		res.computed = after - before
		results = append(results, res)
		b.procs.stopLast(4) // the Caddy and its engines: the next policy starts cold
	}
	writeAgents(stdout, shape, results)
	if cfg.check {
		return checkAgents(results)
	}
	return nil
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

// prefillTokens sums the engines' prompt tokens computed.
func prefillTokens(ctx context.Context, engines []string) (float64, error) {
	sum := 0.0
	for _, e := range engines {
		body, err := getBody(ctx, "http://"+e+"/metrics")
		if err != nil {
			return 0, err
		}
		n, err := counterValue(body, "mlc_engine_prefill_tokens_total")
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", e, err)
		}
		sum += n
	}
	return sum, nil
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

// runSessions runs every session to its last turn, together.
func runSessions(ctx context.Context, base string, shape agentShape, res *agentResult) error {
	head := agentTokens(1, shape.sharedHead)
	client := &http.Client{Timeout: 5 * time.Minute}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, shape.sessions)
	for k := range shape.sessions {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(k), 7))
			prompt := append(slices.Clone(head), agentTokens(uint64(100+k), shape.ownHead)...)
			for turn := range shape.turns {
				added := len(prompt)
				if turn > 0 {
					added = shape.toolResult
					prompt = append(prompt, agentTokens(uint64(10000+k*100+turn), shape.toolResult)...)
				}
				t := agentCall(ctx, client, base, prompt, shape.generate)
				t.newTokens = added
				mu.Lock()
				res.turns[turn] = append(res.turns[turn], t)
				mu.Unlock()
				if t.err != nil {
					errs[k] = t.err
					return
				}
				tool := shape.toolMin + time.Duration(r.Int64N(int64(shape.toolMax-shape.toolMin)+1))
				select {
				case <-time.After(tool):
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

// agentCall streams one turn and measures its time to first token and
// the usage's cached tokens.
func agentCall(ctx context.Context, client *http.Client, base string, prompt []int, generate int) agentTurn {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": generate, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
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
			Choices []struct{ Text string }
			Usage   *struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return agentTurn{err: fmt.Errorf("%w: %.200s", err, data)}
		}
		if t.ttft == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			t.ttft = time.Since(t0)
		}
		if u := chunk.Usage; u != nil {
			t.prompt = u.PromptTokens
			if u.PromptTokensDetails != nil {
				t.cached = u.PromptTokensDetails.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		return agentTurn{err: err}
	}
	if t.prompt == 0 {
		return agentTurn{err: fmt.Errorf("no usage in the stream")}
	}
	return t
}

// turnFigures are one turn index's figures of a policy's run.
type turnFigures struct {
	p50, p99      time.Duration
	cached, ideal float64 // shares of the prompt tokens
}

func figuresOf(turns []agentTurn) turnFigures {
	var ttfts []time.Duration
	var prompt, cached, ideal float64
	for _, t := range turns {
		ttfts = append(ttfts, t.ttft)
		prompt += float64(t.prompt)
		cached += float64(t.cached)
		ideal += float64(t.prompt - t.newTokens)
	}
	return turnFigures{p50: percentile(ttfts, 0.50), p99: percentile(ttfts, 0.99), cached: div(cached, prompt), ideal: div(ideal, prompt)}
}

// later are a run's turns after the first, together.
func (r agentResult) later() []agentTurn {
	var out []agentTurn
	for _, ts := range r.turns[1:] {
		out = append(out, ts...)
	}
	return out
}

func writeAgents(w io.Writer, shape agentShape, results []agentResult) {
	fmt.Fprintf(w, "\n### Agent sessions: %d sessions of %d turns, head %d shared + %d own, +%d a turn, %d generated, tool time %v-%v; mode whole, 3 engines\n\n",
		shape.sessions, shape.turns, shape.sharedHead, shape.ownHead, shape.toolResult, shape.generate, shape.toolMin, shape.toolMax)
	fmt.Fprintln(w, "| policy | turn | TTFT p50 ms | TTFT p99 ms | cached share | ideal share |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: |")
	for _, r := range results {
		for i, ts := range r.turns {
			f := figuresOf(ts)
			fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.0f%% | %.0f%% |\n", r.policy, i+1, ms(f.p50), ms(f.p99), 100*f.cached, 100*f.ideal)
		}
	}
	fmt.Fprintln(w, "\n| policy | TTFT p50 ms, turns 2+ | cached share, turns 2+ (ideal) | prompt tokens computed | requests/s |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: |")
	for _, r := range results {
		f := figuresOf(r.later())
		n := 0
		for _, ts := range r.turns {
			n += len(ts)
		}
		fmt.Fprintf(w, "| %s | %.1f | %.0f%% (%.0f%%) | %.0f | %.2f |\n", r.policy, ms(f.p50), 100*f.cached, 100*f.ideal, r.computed, float64(n)/r.wall.Seconds())
	}
}

// checkAgents holds the run to the goals that mode whole can
// measure: prefix_aware's time to first token p50 over the turns after
// the first at most 0.3x least_loaded's, and its cached share at least
// 85% of the ideal.
func checkAgents(results []agentResult) error {
	by := map[string]turnFigures{}
	for _, r := range results {
		by[r.policy] = figuresOf(r.later())
	}
	pa, ll := by["prefix_aware"], by["least_loaded"]
	var missed []string
	if float64(pa.p50) > 0.3*float64(ll.p50) {
		missed = append(missed, fmt.Sprintf("prefix_aware TTFT p50 %.1f ms is over 0.3x least_loaded's %.1f ms", ms(pa.p50), ms(ll.p50)))
	}
	if pa.cached < 0.85*pa.ideal {
		missed = append(missed, fmt.Sprintf("prefix_aware cached share %.0f%% is under 85%% of the ideal %.0f%%", 100*pa.cached, 100*pa.ideal))
	}
	if len(missed) > 0 {
		return fmt.Errorf("agents: goals missed: %s", strings.Join(missed, "; "))
	}
	return nil
}
