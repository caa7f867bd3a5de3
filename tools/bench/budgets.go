package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// The budgets run (-budgets -replicas N, issue 28): N Caddys in front of
// the same two engines share one tenant's budget of tokens_per_minute L
// through a redis-server the bench starts. The tenant sends as fast as it
// is admitted for a window, its requests spread over every replica in
// turn; then another tenant of the same rule through one replica alone.
// A bucket of L a minute holds L and refills L/60 a second, so a window
// of W seconds admits at most L + L×W/60: spread over the replicas, the
// tenant is held to that (goalBudgetOver, plus one request's reservation
// that may be in flight when the bucket runs dry); alone, it reaches it
// (within goalBudgetUnder).

// The budgets run's load and goals.
const (
	budgetClients    = 8  // the tenant's concurrent requests
	budgetMaxTokens  = 16 // each request's max_tokens
	budgetRetryPause = 25 * time.Millisecond
	goalBudgetOver   = 1.05 // admitted ≤ bound × this + one reservation
	goalBudgetUnder  = 0.95 // alone, admitted ≥ bound × this
)

// budgetResult is one tenant's window.
type budgetResult struct {
	name     string
	replicas int
	admitted int64 // tokens of the answered requests (usage total_tokens)
	answered int64
	limited  int64 // 429s
	window   time.Duration
}

// runBudgets runs the budgets run and prints its table.
func (b *bench) runBudgets(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	redis, err := b.startRedis(ctx)
	if err != nil {
		return err
	}
	engines, err := b.startEngines(ctx, 2)
	if err != nil {
		return err
	}
	var replicas []*caddyProc
	for i := range cfg.replicas {
		name := fmt.Sprintf("budget-%d", i)
		c, err := b.startCaddyWith(ctx, name, clusterOption(redis, cfg.replicas), mlcBudget(engines, cfg.budgetLimit), false)
		if err != nil {
			return err
		}
		if err := newParty(name, name, c).waitServing(ctx); err != nil {
			return err
		}
		replicas = append(replicas, c)
	}
	progressf("%d replicas serving, sharing through redis-server on %d; the tenant spends for %v (work directory %s)", cfg.replicas, redis, cfg.budgetWindow, b.work)
	var results []budgetResult
	for _, run := range []struct {
		name string
		on   []*caddyProc
	}{{"spread", replicas}, {"alone", replicas[:1]}} {
		res, err := spendBudget(ctx, cfg, run.name, run.on)
		if err != nil {
			return err
		}
		load.sample()
		progressf("%s: %d tokens admitted in %d requests (%d answered 429) over %d replicas, the bound %.0f",
			res.name, res.admitted, res.answered, res.limited, res.replicas, budgetBound(cfg))
		results = append(results, res)
	}
	b.procs.stopAll()
	load.sample()
	writeBudgets(stdout, args, cfg, results, load, time.Since(started))
	return budgetVerdict(cfg, results)
}

// budgetBound is the most a tenant of the run's budget may be admitted in
// the window: a full bucket and the window's refill.
func budgetBound(cfg *config) float64 {
	return float64(cfg.budgetLimit) * (1 + cfg.budgetWindow.Seconds()/60)
}

// budgetReservation is what one request reserves at admission.
func budgetReservation(cfg *config) int { return cfg.promptLen + budgetMaxTokens }

// missed says which goal r misses, or "".
func (r budgetResult) missed(cfg *config) string {
	bound := budgetBound(cfg)
	over := bound*goalBudgetOver + float64(budgetReservation(cfg))
	switch {
	case float64(r.admitted) > over:
		return fmt.Sprintf("%s: %d tokens admitted, more than %.0f", r.name, r.admitted, over)
	case r.replicas == 1 && float64(r.admitted) < bound*goalBudgetUnder:
		return fmt.Sprintf("%s: %d tokens admitted, less than %.0f", r.name, r.admitted, bound*goalBudgetUnder)
	}
	return ""
}

// spendBudget sends tenant's requests over replicas in turn, as fast as
// they are admitted, for the window; the requests begun in it run to
// their end.
func spendBudget(ctx context.Context, cfg *config, tenant string, replicas []*caddyProc) (budgetResult, error) {
	res := budgetResult{name: tenant, replicas: len(replicas)}
	client := newClient(budgetClients)
	words := promptWords()
	var next atomic.Uint64
	var admitted, answered, limited atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	end := t0.Add(cfg.budgetWindow)
	for i := range budgetClients {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)<<8|'s'))
		wg.Go(func() {
			defer goroutine.Recover(logger, "budget client", nil)
			for time.Now().Before(end) && ctx.Err() == nil {
				ids := make([]int, cfg.promptLen)
				for j := range ids {
					ids[j] = words[rng.IntN(len(words))]
				}
				body, _ := json.Marshal(completionBody{Model: "tiny", Prompt: ids, MaxTokens: budgetMaxTokens})
				c := replicas[(next.Add(1)-1)%uint64(len(replicas))]
				tokens, ok, err := budgetRequest(ctx, client, c.base, tenant, body)
				switch {
				case err != nil:
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				case ok:
					admitted.Add(int64(tokens))
					answered.Add(1)
				default:
					limited.Add(1)
					time.Sleep(budgetRetryPause)
				}
			}
		})
	}
	wg.Wait()
	res.window = time.Since(t0)
	res.admitted, res.answered, res.limited = admitted.Load(), answered.Load(), limited.Load()
	if firstErr != nil {
		return res, fmt.Errorf("tenant %s: %w", tenant, firstErr)
	}
	return res, ctx.Err()
}

// budgetRequest sends one completion as tenant: its usage's total tokens
// when answered, ok false when over budget (429).
func budgetRequest(ctx context.Context, client *http.Client, base, tenant string, body []byte) (int, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, _, err := postCompletion(ctx, client, base, body, http.Header{headerTenant: {tenant}})
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		return 0, false, nil
	default:
		return 0, false, answerError(resp)
	}
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, false, err
	}
	u := usageOf(msg)
	if u == nil {
		return 0, false, fmt.Errorf("an answer without its usage: %.200s", msg)
	}
	return u.TotalTokens, true, nil
}

// writeBudgets prints the budgets run.
func writeBudgets(w io.Writer, args []string, cfg *config, results []budgetResult, load *loadWatch, took time.Duration) {
	fmt.Fprintf(w, "### Shared budget benchmark, %s\n\n", time.Now().Format("2006-01-02 15:04"))
	fmt.Fprintf(w, "`%s` (%v, commit %s): %d CPUs, %s.\n\n", commandLine(args), took.Round(time.Second), commit(), runtime.NumCPU(), load)
	bound := budgetBound(cfg)
	fmt.Fprintf(w, "%d Caddy replicas with the `mlc` global option's `cluster` (a redis-server the bench starts, `replicas %d`) in front of two built-in engines, "+
		"`budget * tokens_per_minute %d`, the tenant from `%s`. For %v, %d clients send completions of %d random token ids, max_tokens %d "+
		"(a reservation of %d tokens), one after another, pausing %v after a 429: **spread** takes the replicas in turn, **alone** (another tenant) sends through one. "+
		"Admitted: the usage's total tokens of the answered requests. The bucket holds %d and refills %d/60 a second: the bound is %d + %d × %.0f s / 60 = %.0f.\n\n",
		cfg.replicas, cfg.replicas, cfg.budgetLimit, headerTenant, cfg.budgetWindow, budgetClients, cfg.promptLen, budgetMaxTokens,
		budgetReservation(cfg), budgetRetryPause, cfg.budgetLimit, cfg.budgetLimit, cfg.budgetLimit, cfg.budgetLimit, cfg.budgetWindow.Seconds(), bound)
	fmt.Fprintln(w, "| tenant | replicas | answered | 429s | tokens admitted | admitted / bound | goal |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range results {
		goal := fmt.Sprintf("≤ %.0f", bound*goalBudgetOver+float64(budgetReservation(cfg)))
		if r.replicas == 1 {
			goal = fmt.Sprintf("%.0f–%.0f", bound*goalBudgetUnder, bound*goalBudgetOver+float64(budgetReservation(cfg)))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.3f | %s %s |\n", r.name, r.replicas, r.answered, r.limited, r.admitted,
			div(float64(r.admitted), bound), goal, mark(r.missed(cfg) != ""))
	}
	fmt.Fprintln(w)
	verdict := "Met."
	if err := budgetMisses(cfg, results); err != nil {
		verdict = "Missed ✗: " + err.Error() + "."
	}
	fmt.Fprintf(w, "- Goals (issue 28): spread over the replicas, admitted ≤ the bound × %.2f + one reservation; alone, within %.0f%% of the bound. %s\n",
		goalBudgetOver, (1-goalBudgetUnder)*100, verdict)
}

// budgetVerdict is the run's outcome: a missed goal fails it only with
// -check.
func budgetVerdict(cfg *config, results []budgetResult) error {
	if !cfg.check {
		return nil
	}
	return budgetMisses(cfg, results)
}

// budgetMisses joins the goals the results miss.
func budgetMisses(cfg *config, results []budgetResult) error {
	var errs []error
	for _, r := range results {
		if m := r.missed(cfg); m != "" {
			errs = append(errs, errors.New(m))
		}
	}
	return errors.Join(errs...)
}
