package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/internal/stopscan"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// choiceJob generates one choice, resuming it after preemption or failure
// from the text already delivered, so the client sees one coherent text:
// nothing repeated, nothing lost.
type choiceJob struct {
	c     *completion
	index int
	// What it needs of the router, given, not reached for.
	tok         Tokenizer // nil: the router has no tokenizer for the model
	maxAttempts int
	metrics     *routerMetrics

	seed      *int64
	suffix    string // ends the text (the request's suffix)
	stop      *stopscan.Scanner
	logprobs  *choiceLogprobs
	delivered strings.Builder // text the client has of this choice
	avoid     map[string]bool // engine processes that failed this choice (see avoidKey)
	preempted string          // the engine process that preempted the last attempt (see avoidNext)
	// prefillOverruns counts the attempts whose prefill outran its
	// allowance: one is retried (see prefillRetry).
	prefillOverruns int
	st              stats
	started         time.Time
	lastText        time.Time           // when the client got text last
	waited          engineWait          // time spent waiting on engines, queues and backoffs
	itl             prometheus.Observer // inter-token latency, for a client that streams

	// Of the current attempt.
	before   int             // tokens delivered before it
	received int             // bytes of generated text received, the held-back included
	base     int             // bytes delivered before it: where its text begins
	chunks   int             // its chunks that carried text
	usage    *protocol.Usage // the engine's count, once it finished
	// cached is what the first attempt that said reused of the prompt;
	// -1 until one says (see cachedtokens.go); expected what the router
	// expected of that attempt (cacheaccount.go), -1 unknown.
	cached, expected int
	announced        bool     // the sink was told the cached tokens (announce)
	open             *attempt // being read: closed by run's recovery on a panic
}

// stats are what the choice's attempts amounted to.
func (j *choiceJob) stats() stats {
	j.st.tokens = j.tokensDelivered()
	return j.st
}

// tokensDelivered counts the tokens the client got, however the choice
// ended: a finished attempt's engine count on top of the tokens before it;
// else (a stop string cut the text, the client left, the attempts ran out)
// the tokens of the delivered text, or, without a tokenizer, the chunks of
// the attempt that delivered it (an engine sends a chunk per token).
func (j *choiceJob) tokensDelivered() int {
	switch {
	case j.usage != nil:
		return j.before + j.usage.CompletionTokens
	case j.delivered.Len() == 0:
		return 0
	case j.tok != nil:
		return len(j.tok.Encode(j.delivered.String()))
	}
	return j.before + j.chunks
}

// run runs the attempts of the choice until it is complete: each starts
// on the mode's strategy (on the router that serves new attempts, after
// a reload its successor), is read to the client and closed; one that
// fails or is preempted is followed by another, from the text delivered.
func (j *choiceJob) run(ctx context.Context, out sink) (err error) {
	// A bug here must fail this request, not the server: the goroutine
	// may be ours, and net/http's recovery does not cover it.
	defer goroutine.Recover(j.c.log, "serving a choice", func(any) {
		if j.open != nil {
			j.open.Close(ErrRouteDropped)
		}
		err = protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "internal error")
	})
	j.started = j.c.begin
	ctx = withEngineWait(ctx, &j.waited)
	if j.c.req.Echo {
		if err := j.echo(out); err != nil {
			return err
		}
	}
	cause := ""
	// fruitless counts the attempts in a row that delivered no text: the
	// backoff grows with them, not with the attempts a long stream made
	// over its life (each engine lost costs it one).
	fruitless := 0
	for n := 1; ; n++ {
		j.st.attempts = n
		req, remaining := j.attemptRequest(n)
		if remaining == 0 {
			return j.finish(protocol.FinishLength, nil, out)
		}
		j.resumeFrom()
		delivered := j.delivered.Len()
		actx, span := j.startSpan(ctx, n, cause)
		actx, attemptOut, ended := j.attemptSink(actx, out)
		finished := false
		a, err := j.c.r.serving().strategy.start(withPrefillScale(actx, 1+j.prefillOverruns), req, j.avoidNext())
		if err != nil {
			j.blame(err) // the engine failed before it generated
		} else {
			j.open = a
			finished, err = j.read(a, attemptOut)
			j.open = nil
			a.Close(err)
		}
		ended(finished)
		span.SetAttributes(attribute.Int("mlc.preemptions", j.st.preemptions), attribute.String("mlc.outcome", attemptOutcome(finished, err)))
		endSpan(span, err)
		if finished {
			return err
		}
		again := false
		if cause, again, err = j.next(ctx, err, n, delivered, &fruitless); err != nil {
			return err
		}
		if again {
			n-- // resumed at once, no attempt spent
		}
	}
}

// attemptSink is what an attempt writes to: out, behind a parking sink
// where the choice may park (canPark: the context is then cancelled
// when it parks), and behind a staging sink where the attempts of a
// structured answer that cannot resume its grammar are staged
// (stagesAttempts). ended, called with whether the attempt
// finished the choice, stops the parking watch and drops staged text.
func (j *choiceJob) attemptSink(ctx context.Context, out sink) (context.Context, sink, func(finished bool)) {
	unpark := func() {}
	if j.canPark() {
		var park context.CancelCauseFunc
		ctx, park = context.WithCancelCause(ctx)
		ps := newParkingSink(out, park)
		out, unpark = ps, func() { ps.stop(); park(nil) }
	}
	if !j.stagesAttempts() {
		return ctx, out, func(bool) { unpark() }
	}
	staged := &stagedSink{sink: out}
	return ctx, staged, func(finished bool) {
		unpark()
		if !finished {
			j.restart() // nothing reached the client: the next attempt starts over
		}
	}
}

// next decides what follows attempt n, which ended with err after the
// choice had delivered bytes: the cause of the next attempt, and again
// when it starts at once without spending an attempt (a parked choice
// whose client reads again, a router whose engines drain after a
// reload); otherwise it waits its backoff first, which grows with the
// fruitless attempts in a row. A non-nil error ends the choice.
func (j *choiceJob) next(ctx context.Context, err error, n, delivered int, fruitless *int) (cause string, again bool, _ error) {
	if errors.Is(err, errParked{}) && ctx.Err() == nil {
		j.metrics.retry(causeParked)
		j.c.log.Debug("resuming a parked choice", zap.Int("choice", j.index), zap.Int("delivered", j.delivered.Len()))
		return causeParked, true, nil
	}
	if j.delivered.Len() > delivered {
		*fruitless = 0
	}
	*fruitless++
	cause, err = j.retry(ctx, err, n, *fruitless)
	if err != nil {
		return "", false, err
	}
	if cause == "" {
		return "", true, nil // the attempt goes to the successors of the router's engines, at once
	}
	if err := waitBackoff(ctx, *fruitless, cause == causePreempt || cause == causeMigrate); err != nil {
		return "", false, context.Cause(ctx)
	}
	return cause, false, nil
}

// startSpan starts the span of attempt n, which follows a retry of cause.
func (j *choiceJob) startSpan(ctx context.Context, n int, cause string) (context.Context, trace.Span) {
	return startSpan(ctx, "mlc.attempt", attribute.Int("mlc.choice", j.index), attribute.Int("mlc.attempt", n),
		attribute.String("mlc.mode", j.c.r.Mode), attribute.String("mlc.model", j.c.r.Model), attribute.String("mlc.retry_cause", cause),
		attribute.Int("mlc.resumed_tokens", j.before))
}

// retry decides what follows attempt n, which ended with err without
// completing the choice, the last of fruitless attempts in a row that
// delivered no text: the cause of the next attempt; "" when the router
// drains after a reload and its successor takes the attempt at once, no
// attempt spent; or the error that ends the choice. The choice ends after
// max_attempts fruitless attempts: one whose attempts keep delivering
// text (resumed after preemptions under KV pressure) goes on to its end.
func (j *choiceJob) retry(ctx context.Context, err error, n, fruitless int) (string, error) {
	if ctx.Err() != nil {
		return "", context.Cause(ctx)
	}
	if errors.Is(err, errDraining) {
		return "", nil
	}
	var none *noEngineError
	if errors.As(err, &none) {
		return "", none.apiError() // it waited in the queue already
	}
	cause := retryCause(err)
	if apiErr := j.prefillRetry(cause, err); apiErr != nil {
		return "", apiErr
	}
	switch {
	case cause == "":
		return "", err
	case fruitless >= j.maxAttempts:
		return "", j.exhausted(err)
	case j.delivered.Len() > 0 && j.tok == nil:
		return "", protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
			"the engine stopped this request after text was sent, and without the model's tokenizer the router cannot resume it").WithCode(codeCannotResume)
	case j.delivered.Len() > 0 && !j.grammarResumes():
		return "", cannotResumeGrammar()
	}
	j.metrics.retry(cause)
	j.c.log.Debug("retrying", zap.Int("choice", j.index), zap.Int("attempt", n), zap.String("cause", cause), zap.Error(err))
	return cause, nil
}

// attemptOutcome names how an attempt ended, for its span: finished,
// the retry's cause, or failed.
func attemptOutcome(finished bool, err error) string {
	switch {
	case finished && err == nil:
		return "finished"
	case finished:
		return "failed"
	}
	if c := retryCause(err); c != "" {
		return c
	}
	return "failed"
}

// Causes of a retry, as counted in caddy_mlc_retries_total.
const (
	causePreempt = "preempt" // an engine dropped the request for lack of KV memory
	causeFailure = "failure" // an engine failed: refused, broke a stream, answered 5xx
	causeTimeout = "timeout" // an engine stayed silent for the engine timeout
	causeMigrate = "migrate" // an operator's drain of the engine ended its grace
	causePrefill = "prefill" // a prefill outran its allowance on an engine that kept answering
)

// retryCause returns why an attempt that ended with err may be retried,
// or "" when it may not. A nil err is a preemption seen in the stream.
func retryCause(err error) string {
	var ee *engineError
	switch {
	case err == nil:
		return causePreempt
	case errors.Is(err, errEngineDrained):
		return causeMigrate // before a call (a context's cause) or in one
	case !errors.As(err, &ee) || !ee.retry:
		return ""
	case ee.preempted:
		return causePreempt
	case ee.prefill:
		return causePrefill
	case ee.timeout:
		return causeTimeout
	}
	return causeFailure
}

// echo delivers the prompt as the start of the text (echo: true). The
// router does it rather than the engine so that a resumed attempt never
// echoes again. The echoed prompt carries no logprobs; it shifts the
// text_offset of every token after it.
func (j *choiceJob) echo(out sink) error {
	text := j.c.req.Prompt.Text
	if !j.c.req.Prompt.IsText {
		text = j.tok.Decode(j.c.prompt)
	}
	j.logprobs.echo = len(text)
	if err := out.delta(j.index, text, j.logprobs.none()); err != nil {
		return err
	}
	out.flush()
	return nil
}

// exhausted is the answer when the attempts ran out; last is the last
// attempt's error, nil after a preemption.
func (j *choiceJob) exhausted(last error) *protocol.Error {
	msg := fmt.Sprintf("the request made no progress in %d attempts in a row", j.maxAttempts)
	if last != nil {
		msg += ": last error: " + last.Error()
	} else {
		msg += ": engines kept preempting it (memory pressure)"
	}
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "%s", msg).WithCode("attempts_exhausted")
	e.RetryAfter = retryAfter
	return e
}

// retryBackoff is the wait before a retry after failures in a row.
var retryBackoff = backoff.Backoff{Min: 10 * time.Millisecond, Max: 640 * time.Millisecond}

// waitBackoff waits before the next attempt, after attempt failures in a
// row: briefly after a preemption (the engine is busy, not broken),
// longer and doubling after a failure.
func waitBackoff(ctx context.Context, attempt int, preempted bool) error {
	d := retryBackoff.Attempt(attempt)
	if preempted {
		d = time.Duration(min(attempt, 10)) * 5 * time.Millisecond
	}
	defer engineWaitOf(ctx).since(time.Now())
	return backoff.Sleep(ctx, d)
}

// attemptRequest builds the engine request of an attempt: the prompt is
// the client's plus the text already delivered, max_tokens what is left.
// remaining is 0 when nothing is left to generate, -1 when unbounded.
func (j *choiceJob) attemptRequest(attempt int) (*protocol.CompletionRequest, int) {
	src := j.c.req
	req := src.Clone()
	prompt := j.c.prompt
	if j.delivered.Len() > 0 {
		generated := j.tok.Encode(j.delivered.String())
		j.before = len(generated)
		prompt = append(append(make([]int, 0, len(prompt)+len(generated)), prompt...), generated...)
	}
	remaining := -1
	if src.MaxTokens != nil {
		remaining = max(*src.MaxTokens-j.before, 0)
		req.MaxTokens = new(remaining)
	}
	req.Prompt = protocol.TokenPrompt(prompt)
	if req.ResponseFormat != nil {
		// The engine's grammar starts after the text delivered, which
		// the prompt now ends with.
		req.ResponseFormat.ResumedTokens = len(prompt) - len(j.c.prompt)
	}
	req.N, req.BestOf = nil, nil
	req.Echo = false
	req.Seed = j.seed
	// A client that streams gets a streamed generation, with usage; one
	// that does not gets one whole answer (it carries its usage), as MLC's
	// router does: a preempted one still returns its text so far.
	req.Stream = src.Stream
	req.StreamOptions = nil
	if req.Stream {
		req.StreamOptions = &protocol.StreamOptions{IncludeUsage: true}
	}
	req.DebugConfig = nil // never the client's: engines run with --enable-debug
	// Its place in the engines' order is its first arrival's, on every
	// attempt: a resumed request goes before later ones, and is not the
	// one preempted next (the built-in engine; MLC's ignore it).
	req.Arrival = j.c.begin.UnixMicro()
	// The suffix ends the client's text once (see finish): an engine
	// would append it to every attempt's text, and MLC's prep_recv
	// refuses it.
	req.Suffix = nil
	// The engines tie the microserving calls of an attempt together by
	// user, so it names the attempt: a failed attempt's reservation is
	// released by its own name, never by a later attempt's.
	req.User = new(fmt.Sprintf("%s-%d-%d", j.c.id, j.index, attempt))
	return req, remaining
}

// resumeFrom readies the choice for an attempt that resumes from the
// text delivered: what an earlier attempt left held back is generated
// again.
func (j *choiceJob) resumeFrom() {
	j.stop.Drop()
	j.logprobs.resume(j.delivered.Len())
	j.base, j.received, j.chunks = j.delivered.Len(), j.delivered.Len(), 0
}

// read reads the attempt to the client. finished reports that the choice
// is complete (err then says whether the client got it); otherwise err is
// why the attempt failed, or nil after a preemption: the engine's part
// ended well when err is nil.
func (j *choiceJob) read(a *attempt, out sink) (finished bool, err error) {
	defer out.flush() // whatever ends the attempt, the client gets what it was given
	defer j.noteReused(a)
	j.st.servedBy(a.l.addr)
	reason := ""
	var usage *protocol.Usage
	for {
		if parked(out) {
			return false, errParked{}
		}
		chunk, err := a.next()
		if err == io.EOF {
			break
		}
		if parked(out) {
			return false, errParked{}
		}
		if err != nil {
			j.blame(err)
			return false, err
		}
		j.announce(a, out)
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			// A whole answer brings its text with its finish, a
			// preemption's too.
			hit, err := j.deliver(ch.Text, ch.Logprobs, out)
			if err != nil {
				return false, err
			}
			if hit {
				return true, j.finish(protocol.FinishStop, nil, out)
			}
			switch r := ch.Finished(); r {
			case protocol.FinishPreempt:
				j.st.preemptions++
				j.metrics.preempted()
				j.preempted = a.l.procKey()
				return false, nil // the text so far stays delivered; resume from it
			case "":
			default:
				reason = r
			}
		}
		if !a.pending() {
			out.flush()
		}
	}
	if reason == "" {
		return false, badAnswer("stream", &a.l.proc, "an answer without a finish reason", errors.New("stream ended without a finish reason"))
	}
	if err := j.send(j.stop.Flush(), j.logprobs.take(j.received), out); err != nil {
		return false, err
	}
	return true, j.finish(reason, usage, out)
}

// blame remembers the engine process that failed an attempt, so the next
// attempts prefer another. A preemption blames nobody. The engine
// restarted is another process, which nothing here avoids: the streams it
// lost are the ones to take its room.
func (j *choiceJob) blame(err error) {
	var ee *engineError
	if errors.As(err, &ee) && ee.blames() && ee.proc != "" {
		if j.avoid == nil {
			j.avoid = map[string]bool{}
		}
		j.avoid[ee.proc] = true
	}
}

// avoidNext returns the engine processes the next attempt avoids: those
// that failed the choice, and the one that preempted the last attempt,
// which is short of KV memory now (a preemption blames nobody: only the
// next attempt avoids it).
func (j *choiceJob) avoidNext() map[string]bool {
	key := j.preempted
	j.preempted = ""
	if key == "" || j.avoid[key] {
		return j.avoid
	}
	avoid := maps.Clone(j.avoid)
	if avoid == nil {
		avoid = map[string]bool{}
	}
	avoid[key] = true
	return avoid
}

// deliver passes an engine's text through the stop scanner to the client,
// with the logprobs of the tokens whose text goes out. hit reports a stop
// string: the text ends before it, and so do the logprobs.
func (j *choiceJob) deliver(text string, logprobs *protocol.CompletionLogprobs, out sink) (hit bool, err error) {
	from := j.received
	j.received += len(text)
	if j.logprobs.want {
		logprobs = withOffsets(logprobs, text, from-j.base, j.tok)
	}
	j.logprobs.add(logprobs, j.base, from, j.received)
	if text != "" {
		j.chunks++
		text, hit = j.stop.Push(text)
	}
	end := j.delivered.Len() + len(text)
	if hit {
		return true, j.send(text, j.logprobs.cut(end), out)
	}
	return false, j.send(text, j.logprobs.take(end), out)
}

// send gives text that passed the stop scanner, and the logprobs that go
// with it, to the client.
func (j *choiceJob) send(text string, logprobs *protocol.CompletionLogprobs, out sink) error {
	if text == "" && logprobs.Len() == 0 {
		return nil
	}
	if text != "" {
		now := time.Now()
		if j.st.firstToken == 0 {
			j.st.firstToken = now.Sub(j.started)
			j.st.ownTime = j.st.firstToken - j.waited.total()
		} else if j.itl != nil {
			j.itl.Observe(now.Sub(j.lastText).Seconds())
		}
		j.lastText = now
	}
	j.delivered.WriteString(text)
	if err := out.delta(j.index, text, logprobs); err != nil {
		return fmt.Errorf("writing to the client: %w", context.Canceled)
	}
	return nil
}

// finish ends the choice. usage is the finished attempt's engine count,
// when it gave one. Logprobs still held (a token whose text was partly
// delivered when its attempt failed) go out first.
func (j *choiceJob) finish(reason string, usage *protocol.Usage, out sink) error {
	if err := j.send("", j.logprobs.cut(j.delivered.Len()), out); err != nil {
		return err
	}
	if j.suffix != "" {
		// As MLC's engine ends a completion: the suffix after the text,
		// without tokens or logprobs of its own.
		if err := out.delta(j.index, j.suffix, j.logprobs.none()); err != nil {
			return err
		}
	}
	j.usage = usage
	out.finish(j.index, reason)
	return nil
}
