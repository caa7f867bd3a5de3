package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// tenantLoad is one tenant's streams: each sends one streamed completion
// after another until its context ends, and every request is recorded.
type tenantLoad struct {
	name string
	wg   sync.WaitGroup

	mu       sync.Mutex
	reqs     []*fairSample // in the order they began
	nFailed  int
	firstErr error
}

// fairSample is one request of a tenant.
type fairSample struct {
	began  time.Time
	ended  bool
	ok     bool // ended with its [DONE], and not because the run stopped
	ttft   time.Duration
	tokens int // completion tokens, from the stream's usage
}

// startTenant starts streams clients for tenant in band, each drawing
// its requests' max_tokens from maxTokens.
func startTenant(ctx context.Context, r *gatedRouter, tenant string, band, streams int, cfg *config, maxTokens func(*rand.Rand) int) *tenantLoad {
	l := &tenantLoad{name: tenant}
	words := promptWords()
	for i := range streams {
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)<<8|uint64(tenant[0])))
		l.wg.Go(func() {
			defer goroutine.Recover(logger, "tenant "+tenant, func(p any) { l.fail(fmt.Errorf("panic: %v", p)) })
			for ctx.Err() == nil {
				body := fairBody(rng, words, cfg.promptLen, maxTokens(rng))
				s := l.begin()
				ttft, tokens, err := r.stream(ctx, r.base(tenant, i), tenant, band, body)
				l.end(s, ttft, tokens, err, ctx.Err() != nil)
			}
		})
	}
	return l
}

// fairRequest is a streamed completion that asks for its usage.
type fairRequest struct {
	completionBody
	StreamOptions streamOptions `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// fairBody is a streamed completion of promptLen random token ids that
// asks for its usage, to show how many tokens the request cost.
func fairBody(rng *rand.Rand, words []int, promptLen, maxTokens int) []byte {
	ids := make([]int, promptLen)
	for j := range ids {
		ids[j] = words[rng.IntN(len(words))]
	}
	b, _ := json.Marshal(fairRequest{
		completionBody: completionBody{Model: "tiny", Prompt: ids, MaxTokens: maxTokens, Stream: true},
		StreamOptions:  streamOptions{IncludeUsage: true},
	})
	return b
}

func (l *tenantLoad) begin() *fairSample {
	s := &fairSample{began: time.Now()}
	l.mu.Lock()
	l.reqs = append(l.reqs, s)
	l.mu.Unlock()
	return s
}

// end records a request's end; one cut short by the run's end is neither
// answered nor failed.
func (l *tenantLoad) end(s *fairSample, ttft time.Duration, tokens int, err error, stopped bool) {
	l.mu.Lock()
	s.ended = true
	if !stopped && err == nil {
		s.ok, s.ttft, s.tokens = true, ttft, tokens
	}
	l.mu.Unlock()
	if !stopped && err != nil {
		l.fail(err)
	}
}

func (l *tenantLoad) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nFailed++
	if l.firstErr == nil {
		l.firstErr = fmt.Errorf("tenant %s: %w", l.name, err)
	}
}

func (l *tenantLoad) failed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nFailed
}

func (l *tenantLoad) failures() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nFailed, l.firstErr
}

// answered counts the requests begun at since or later that were
// answered.
func (l *tenantLoad) answered(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.reqs {
		if s.ok && !s.began.Before(since) {
			n++
		}
	}
	return n
}

// open counts the requests begun in [since, until) still running.
func (l *tenantLoad) open(since, until time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.reqs {
		if !s.ended && !s.began.Before(since) && s.began.Before(until) {
			n++
		}
	}
	return n
}

func (l *tenantLoad) wait() { l.wg.Wait() }

// tenantFigures are one tenant's answered requests of a window.
type tenantFigures struct {
	requests int
	p50, p99 time.Duration
	tokens   float64 // completion tokens per request
}

// figures sums up the requests begun in [since, until) that were
// answered.
func (l *tenantLoad) figures(since, until time.Time) tenantFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ttfts []time.Duration
	tokens := 0
	for _, s := range l.reqs {
		if s.ok && !s.began.Before(since) && s.began.Before(until) {
			ttfts = append(ttfts, s.ttft)
			tokens += s.tokens
		}
	}
	f := tenantFigures{requests: len(ttfts), p50: percentile(ttfts, 0.50), p99: percentile(ttfts, 0.99)}
	if len(ttfts) > 0 {
		f.tokens = float64(tokens) / float64(len(ttfts))
	}
	return f
}

// stream sends one streamed completion as tenant in band and returns the
// time to its first event and the completion tokens its usage reports.
func (r *gatedRouter) stream(ctx context.Context, base, tenant string, band int, body []byte) (time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	header := http.Header{headerTenant: {tenant}, headerPriority: {strconv.Itoa(band)}}
	resp, t0, err := postCompletion(ctx, r.http, base, body, header)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, answerError(resp)
	}
	first, _, tokens, err := streamTimes(resp.Body)
	return first.Sub(t0), tokens, err
}
