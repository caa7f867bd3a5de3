package router

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// completion is one client request on its way through the fleet: MLC's
// handle_completion, which tokenizes, then loops over attempts until the
// request completes.
type completion struct {
	r      *Router
	id     string
	req    *protocol.CompletionRequest // as the client sent it, prompt tokenized
	prompt []int
	log    *zap.Logger
	begin  time.Time // when the request arrived
	facts  Facts     // who it is for
	// admitWait is the time it waited at the gate for the engines.
	admitWait time.Duration
}

// stats are what one choice's attempts amounted to, or, summed, a
// request's.
type stats struct {
	attempts    int
	preemptions int
	tokens      int           // delivered to the client
	engines     []string      // that generated, in order, each once
	firstToken  time.Duration // from the request's arrival
	// ownTime is the part of firstToken the router spent on its own work,
	// not waiting on an engine (see engineWait).
	ownTime time.Duration
	// cached is what the engines reused of the prompt (see
	// cachedtokens.go), -1 unknown; of a request, its first choice's;
	// expected what the router expected of it (cacheaccount.go).
	cached, expected int
}

// servedBy adds addr to the engines that generated.
func (s *stats) servedBy(addr string) {
	if addr != "" && !slices.Contains(s.engines, addr) {
		s.engines = append(s.engines, addr)
	}
}

// add sums o into s.
func (s *stats) add(o stats) {
	s.attempts += o.attempts
	s.preemptions += o.preemptions
	s.tokens += o.tokens
	for _, e := range o.engines {
		s.servedBy(e)
	}
	if o.firstToken > s.firstToken {
		s.firstToken, s.ownTime = o.firstToken, o.ownTime
	}
}

// run serves every choice and ends the sink.
func (c *completion) run(ctx context.Context, out sink) stats {
	n := c.req.NOr()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make([]*choiceJob, n)
	errs := make([]error, n)
	for i := range jobs {
		jobs[i] = c.choice(i)
	}
	if n == 1 {
		errs[0] = jobs[0].run(ctx, out) // most requests: no goroutine to start and wait for
	} else {
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() { // j.run recovers its own panics
				if errs[i] = j.run(ctx, out); errs[i] != nil {
					cancel(errs[i])
				}
			})
		}
		wg.Wait()
	}
	var total stats
	for _, j := range jobs {
		total.add(j.stats())
	}
	total.cached, total.expected = jobs[0].cached, jobs[0].expected
	if err := firstError(errs); err != nil {
		out.fail(c.clientError(err))
		return total
	}
	out.done(protocol.Usage{PromptTokens: len(c.prompt), CompletionTokens: total.tokens, TotalTokens: len(c.prompt) + total.tokens}.WithCached(total.cached))
	return total
}

func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		// A choice canceled because another failed is not the cause.
		if first == nil || errors.Is(first, context.Canceled) {
			first = err
		}
	}
	return first
}

// clientError turns the error that ended a request into what the client
// is told. An engine's own answer to a request it cannot serve (a 400 such
// as context_length_exceeded) is passed on as it is: no other engine
// would serve it either.
func (c *completion) clientError(err error) *protocol.Error { return answerOf(err) }

// answerOf is what a client is told of the error that ended its request.
func answerOf(err error) *protocol.Error {
	var none *noEngineError
	if errors.As(err, &none) {
		return none.apiError()
	}
	var apiErr *protocol.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var ee *engineError
	if errors.As(err, &ee) && ee.apiErr != nil && !ee.retry {
		return ee.apiErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "request canceled")
	}
	return protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "%v", err)
}

// choice returns the job that generates choice i.
func (c *completion) choice(i int) *choiceJob {
	r := c.r
	j := &choiceJob{c: c, index: i, cached: -1, expected: -1, tok: r.dec.tok, maxAttempts: r.MaxAttempts, metrics: r.metrics,
		stop: stopscan.New(c.req.Stop), logprobs: newChoiceLogprobs(c.req.Logprobs != nil)}
	if c.req.Stream {
		j.itl = c.r.itl
	}
	if c.req.Suffix != nil {
		j.suffix = *c.req.Suffix
	}
	if c.req.Seed != nil {
		seed := protocol.ChoiceSeed(*c.req.Seed, c.req.NOr(), i)
		j.seed = &seed
	}
	return j
}
