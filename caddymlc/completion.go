package caddymlc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// sink receives what the client is to see of a completion: text pieces and
// the end of each choice. Implementations format it as a completion or a
// chat completion, streamed or whole. Methods are called from one goroutine
// per choice; implementations serialise what they need to.
type sink interface {
	// delta delivers text of choice index. An error means the client is
	// gone.
	delta(index int, text string, logprobs *protocol.CompletionLogprobs) error
	// finish ends choice index.
	finish(index int, reason string)
	// done ends the response with the usage of the whole request.
	done(usage protocol.Usage)
	// fail ends the response with an error.
	fail(err *protocol.Error)
}

// completion is one client request on its way through the fleet: MLC's
// handle_completion, which tokenizes, then loops over attempts until the
// request completes.
type completion struct {
	r      *Router
	id     string
	req    *protocol.CompletionRequest // as the client sent it, prompt tokenized
	prompt []int
	log    *zap.Logger
}

// stats are what one choice's attempts amounted to.
type stats struct {
	attempts    int
	preemptions int
	tokens      int
	firstToken  time.Duration
}

// run serves every choice and ends the sink.
func (c *completion) run(ctx context.Context, out sink) stats {
	n := c.req.NOr()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]stats, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A bug here must fail this request, not the server: the
				// goroutine is ours, so net/http's recovery does not cover it.
				if p := recover(); p != nil {
					c.log.Error("panic serving a choice", zap.Any("panic", p), zap.Stack("stack"))
					errs[i] = protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "internal error")
					cancel(errs[i])
				}
			}()
			results[i], errs[i] = c.choice(i).run(ctx, out)
			if errs[i] != nil {
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	total := stats{}
	for _, s := range results {
		total.attempts += s.attempts
		total.preemptions += s.preemptions
		total.tokens += s.tokens
		total.firstToken = max(total.firstToken, s.firstToken)
	}
	if err := firstError(errs); err != nil {
		out.fail(c.clientError(err))
		return total
	}
	out.done(protocol.Usage{PromptTokens: len(c.prompt), CompletionTokens: total.tokens, TotalTokens: len(c.prompt) + total.tokens})
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
// is told.
func (c *completion) clientError(err error) *protocol.Error {
	var apiErr *protocol.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var ee *engineError
	if errors.As(err, &ee) && ee.apiErr != nil && !ee.retry {
		return ee.apiErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(499, protocol.ErrTypeServer, "request canceled")
	}
	return protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "%v", err)
}

// choice returns the job that generates choice i.
func (c *completion) choice(i int) *choiceJob {
	j := &choiceJob{c: c, index: i, stop: stopscan.New(c.req.Stop)}
	if c.req.Seed != nil && i > 0 {
		seed := *c.req.Seed + int64(i)
		j.seed = &seed
	} else {
		j.seed = c.req.Seed
	}
	return j
}

// choiceJob generates one choice, resuming it after preemption or failure
// from the text already delivered, so the client sees one coherent text:
// nothing repeated, nothing lost.
type choiceJob struct {
	c         *completion
	index     int
	seed      *int64
	stop      *stopscan.Scanner
	delivered strings.Builder // text the client has of this choice
	avoid     map[string]bool // engines that failed this choice
	before    int             // tokens delivered before the current attempt
	st        stats
	started   time.Time
}

func (j *choiceJob) run(ctx context.Context, out sink) (stats, error) {
	j.started = time.Now()
	if j.c.req.Echo {
		if err := j.echo(out); err != nil {
			return j.st, err
		}
	}
	for attempt := 1; ; attempt++ {
		j.st.attempts = attempt
		req, remaining := j.attemptRequest(attempt)
		if remaining == 0 {
			out.finish(j.index, protocol.FinishLength)
			j.st.tokens = j.before
			return j.st, nil
		}
		finished, err := j.attempt(ctx, req, out)
		if finished {
			return j.st, nil
		}
		if ctx.Err() != nil {
			return j.st, context.Cause(ctx)
		}
		if errors.Is(err, errDraining) {
			// The router's engines drain after a reload: the attempt
			// goes to the engines that replaced them, at once.
			attempt--
			continue
		}
		var none *noEngineError
		if errors.As(err, &none) {
			return j.st, none.apiError() // it waited in the queue already
		}
		cause := retryCause(err)
		if cause == "" {
			return j.st, err
		}
		if attempt >= j.c.r.MaxAttempts {
			return j.st, j.exhausted(err)
		}
		if j.delivered.Len() > 0 && j.c.r.tok == nil {
			return j.st, protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
				"the engine stopped this request after text was sent, and without the model's tokenizer the router cannot resume it").WithCode("cannot_resume")
		}
		j.c.r.metrics.retry(cause)
		j.c.log.Debug("retrying", zap.Int("choice", j.index), zap.Int("attempt", attempt), zap.String("cause", cause), zap.Error(err))
		if err := waitBackoff(ctx, attempt, cause == causePreempt); err != nil {
			return j.st, context.Cause(ctx)
		}
	}
}

// Causes of a retry, as counted in caddy_mlc_retries_total.
const (
	causePreempt = "preempt" // an engine dropped the request for lack of KV memory
	causeFailure = "failure" // an engine failed: refused, broke a stream, answered 5xx
	causeTimeout = "timeout" // an engine stayed silent for the engine timeout
)

// retryCause returns why an attempt that ended with err may be retried,
// or "" when it may not. A nil err is a preemption seen in the stream.
func retryCause(err error) string {
	var ee *engineError
	switch {
	case err == nil:
		return causePreempt
	case !errors.As(err, &ee) || !ee.retry:
		return ""
	case ee.preempted:
		return causePreempt
	case ee.timeout:
		return causeTimeout
	}
	return causeFailure
}

// echo delivers the prompt as the start of the text (echo: true). The
// router does it rather than the engine so that a resumed attempt never
// echoes again.
func (j *choiceJob) echo(out sink) error {
	text := j.c.req.Prompt.Text
	if !j.c.req.Prompt.IsText {
		text = j.c.r.tok.Decode(j.c.prompt)
	}
	return out.delta(j.index, text, nil)
}

// exhausted is the answer when the attempts ran out; last is the last
// attempt's error, nil after a preemption.
func (j *choiceJob) exhausted(last error) *protocol.Error {
	msg := fmt.Sprintf("the request did not complete in %d attempts", j.c.r.MaxAttempts)
	if last != nil {
		msg += ": last error: " + last.Error()
	} else {
		msg += ": engines kept preempting it (memory pressure)"
	}
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "%s", msg).WithCode("attempts_exhausted")
	e.RetryAfter = retryAfter
	return e
}

// waitBackoff waits before attempt+1: briefly after a preemption, longer
// and growing after a failure.
func waitBackoff(ctx context.Context, attempt int, preempted bool) error {
	d := time.Duration(1<<min(attempt-1, 6)) * 10 * time.Millisecond // 10ms .. 640ms
	if preempted {
		d = time.Duration(min(attempt, 10)) * 5 * time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attemptRequest builds the engine request of an attempt: the prompt is
// the client's plus the text already delivered, max_tokens what is left.
// remaining is 0 when nothing is left to generate, -1 when unbounded.
func (j *choiceJob) attemptRequest(attempt int) (*protocol.CompletionRequest, int) {
	src := j.c.req
	req := src.Clone()
	prompt := j.c.prompt
	if j.delivered.Len() > 0 {
		generated := j.c.r.tok.Encode(j.delivered.String())
		j.before = len(generated)
		prompt = append(append(make([]int, 0, len(prompt)+len(generated)), prompt...), generated...)
	}
	remaining := -1
	if src.MaxTokens != nil {
		remaining = max(*src.MaxTokens-j.before, 0)
		req.MaxTokens = new(remaining)
	}
	req.Prompt = protocol.TokenPrompt(prompt)
	req.N, req.BestOf = nil, nil
	req.Echo = false
	req.Seed = j.seed
	req.Stream = true
	req.StreamOptions = &protocol.StreamOptions{IncludeUsage: true}
	req.DebugConfig = nil // never the client's: engines run with --enable-debug
	// The engines tie the microserving calls of an attempt together by
	// user, so it names the attempt: a failed attempt's reservation is
	// released by its own name, never by a later attempt's.
	req.User = new(fmt.Sprintf("%s-%d-%d", j.c.id, j.index, attempt))
	return req, remaining
}

// attempt runs one attempt. finished reports that the choice is complete;
// otherwise err is why the attempt failed, or nil after a preemption.
func (j *choiceJob) attempt(ctx context.Context, req *protocol.CompletionRequest, out sink) (finished bool, err error) {
	stream, err := j.c.r.target().strategy.open(ctx, req, j.avoid)
	if err != nil {
		j.blame(err)
		return false, err
	}
	defer stream.close()
	j.stop.Drop()
	reason := ""
	var usage *protocol.Usage
	for {
		chunk, err := stream.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			j.blame(err)
			return false, err
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			switch r := ch.Finished(); r {
			case protocol.FinishPreempt:
				j.st.preemptions++
				j.c.r.metrics.preempted()
				return false, nil // the text so far stays delivered; resume from it
			default:
				hit, err := j.deliver(ch.Text, ch.Logprobs, out)
				if err != nil {
					return false, err
				}
				if hit {
					j.finish(protocol.FinishStop, nil, out)
					return true, nil
				}
				if r != "" {
					reason = r
				}
			}
		}
	}
	if reason == "" {
		return false, &engineError{op: "stream", addr: stream.lease().addr, retry: true, err: errors.New("stream ended without a finish reason")}
	}
	if err := j.send(j.stop.Flush(), nil, out); err != nil {
		return false, err
	}
	j.finish(reason, usage, out)
	return true, nil
}

// blame remembers the engine that failed an attempt, so the next attempt
// prefers another. A preemption blames nobody.
func (j *choiceJob) blame(err error) {
	var ee *engineError
	if errors.As(err, &ee) && ee.blames() && ee.addr != "" {
		if j.avoid == nil {
			j.avoid = map[string]bool{}
		}
		j.avoid[ee.addr] = true
	}
}

// deliver passes text through the stop scanner to the client. hit reports
// a stop string.
func (j *choiceJob) deliver(text string, logprobs *protocol.CompletionLogprobs, out sink) (hit bool, err error) {
	if text == "" {
		return false, nil
	}
	text, hit = j.stop.Push(text)
	return hit, j.send(text, logprobs, out)
}

// send gives text that passed the stop scanner to the client.
func (j *choiceJob) send(text string, logprobs *protocol.CompletionLogprobs, out sink) error {
	if text == "" {
		return nil
	}
	if j.st.firstToken == 0 {
		j.st.firstToken = time.Since(j.started)
	}
	j.delivered.WriteString(text)
	if err := out.delta(j.index, text, logprobs); err != nil {
		return fmt.Errorf("writing to the client: %w", context.Canceled)
	}
	return nil
}

// finish ends the choice and counts its tokens: those of earlier attempts
// plus what the last attempt's engine reports (or, without a report, the
// tokens of the delivered text).
func (j *choiceJob) finish(reason string, usage *protocol.Usage, out sink) {
	if usage != nil || j.c.r.tok == nil {
		j.st.tokens = j.before
		if usage != nil {
			j.st.tokens += usage.CompletionTokens
		}
	} else {
		j.st.tokens = len(j.c.r.tok.Encode(j.delivered.String()))
	}
	out.finish(j.index, reason)
}
