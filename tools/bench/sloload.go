package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// sloSample is one request of the goodput run.
type sloSample struct {
	class      *sloClass
	ttft, tpot time.Duration
	err        error
}

// met says whether the request was answered within its targets.
func (s *sloSample) met() bool {
	return s.err == nil && s.ttft <= s.class.ttft && s.tpot <= s.class.tpot
}

// openLoop sends the mix to r as a Poisson process of rate requests a
// second for d, and returns every request once all have ended.
func openLoop(ctx context.Context, r *sloRouter, rng *rand.Rand, rate float64, d time.Duration) []*sloSample {
	words := promptWords()
	var (
		mu  sync.Mutex
		out []*sloSample
		wg  sync.WaitGroup
	)
	end := time.Now().Add(d)
	next := time.Now()
	for ctx.Err() == nil {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if next.After(end) {
			break
		}
		time.Sleep(time.Until(next)) // the arrival process itself, not a wait for an event
		c := pickClass(rng)
		body := fairBody(rng, words, c.promptLen, c.maxTokens)
		wg.Go(func() {
			s := &sloSample{class: c}
			defer goroutine.Recover(logger, "slo request", func(p any) { s.err = fmt.Errorf("panic: %v", p) })
			s.ttft, s.tpot, s.err = r.streamSLO(ctx, body, c.ttft, c.tpot)
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// pickClass draws a class of the mix by its share.
func pickClass(rng *rand.Rand) *sloClass {
	x := rng.Float64()
	for i := range sloMix {
		if x -= sloMix[i].share; x < 0 {
			return &sloMix[i]
		}
	}
	return &sloMix[len(sloMix)-1]
}

// streamSLO sends one streamed completion with its targets (none when
// zero) and returns its time to first token and per output token after
// it.
func (r *sloRouter) streamSLO(ctx context.Context, body []byte, ttft, tpot time.Duration) (time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	header := http.Header{}
	if ttft > 0 {
		header.Set("X-SLO-TTFT-Ms", strconv.FormatInt(ttft.Milliseconds(), 10))
		header.Set("X-SLO-TPOT-Ms", strconv.FormatInt(tpot.Milliseconds(), 10))
	}
	resp, t0, err := postCompletion(ctx, r.http, r.caddy.base, body, header)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, answerError(resp)
	}
	first, last, tokens, err := streamTimes(resp.Body)
	var perToken time.Duration
	if tokens > 1 {
		perToken = last.Sub(first) / time.Duration(tokens-1)
	}
	return first.Sub(t0), perToken, err
}

// sloEqual is a policy's closed loop on the equal fleet, no targets.
type sloEqual struct {
	policy  string
	n       int
	rps     float64
	ttftP50 time.Duration
	errs    int

	took  time.Duration
	ttfts []time.Duration
}

// equal runs sloEqualConc streams of the mix, without targets, for d,
// adding to eq.
func (r *sloRouter) equal(ctx context.Context, cfg *config, d time.Duration, eq *sloEqual) error {
	eq.policy = r.policy
	if err := r.waitIdle(ctx); err != nil {
		return err
	}
	words := promptWords()
	var (
		mu    sync.Mutex
		ttfts []time.Duration
		wg    sync.WaitGroup
	)
	begin := time.Now()
	end := begin.Add(d)
	for i := range sloEqualConc {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		wg.Go(func() {
			defer goroutine.Recover(logger, "slo equal stream", nil)
			for ctx.Err() == nil && time.Now().Before(end) {
				c := pickClass(rng)
				ttft, _, err := r.streamSLO(ctx, fairBody(rng, words, c.promptLen, c.maxTokens), 0, 0)
				mu.Lock()
				if err != nil {
					eq.errs++
				} else {
					ttfts = append(ttfts, ttft)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	eq.took += time.Since(begin)
	eq.ttfts = append(eq.ttfts, ttfts...)
	eq.n = len(eq.ttfts)
	eq.rps = float64(eq.n) / eq.took.Seconds()
	eq.ttftP50 = percentile(eq.ttfts, 0.5)
	return ctx.Err()
}
