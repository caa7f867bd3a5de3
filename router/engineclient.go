package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/descriptors"
	"github.com/caddy-mlc/caddy-mlc/internal/watchdog"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// DefaultEngineTimeout bounds how long an engine may keep a call waiting
// for its first byte, and how long a stream may stay silent. A healthy
// engine under load answers within a few seconds: a full-context prefill
// takes seconds on a GPU, and a running stream gets a token every decode
// step. Fifteen seconds is well above that and still short enough that a
// frozen engine costs its clients one short stall before their streams
// resume elsewhere. Raise it for engines whose queues legitimately hold a
// request longer (very long prompts on slow hardware).
const DefaultEngineTimeout = 15 * time.Second

// jsonContentType is the Content-Type of every call to an engine, one
// slice for all (the transport only reads it), rather than one per call.
var jsonContentType = []string{"application/json"}

// engineIdleTimeout is how long an idle connection to an engine is kept.
const engineIdleTimeout = 4 * time.Second

// maxEngineErrorBody bounds how much of an engine's error answer is read.
const maxEngineErrorBody = 64 << 10

// engineClient speaks the MLC serve API to engines. Every call is bounded
// by the engine timeout: to its first byte, and between the chunks of a
// stream. It knows where an engine is and how long it may stay silent,
// nothing of the balancer: what a call says of the engine (its verdict,
// its first token, its load) the caller reads from what it returns, and
// reports through its lease.
type engineClient struct {
	http    *http.Client
	timeout time.Duration
	log     *zap.Logger // for what is nobody's fault but the router's (out of descriptors)
	noFDs   *descriptorLog
}

// callee is an engine as the engine client sees it: where a call goes.
type callee interface {
	// Addr is the engine's host:port, which its errors name.
	Addr() string
	// baseURL is where its API is.
	baseURL() string
	// alive reports that the engine still runs the process the call
	// went to, and is ready: the watchdog of a whole generation asks.
	alive() bool
	// procKey names the process the call went to, which its errors name
	// too: a restarted engine is another (see avoidKey).
	procKey() string
	// lastToken is when a call last got a token from the engine: the
	// watchdog of a first token asks whether the engine is busy or
	// silent.
	lastToken() time.Time
}

func newEngineClient(timeout time.Duration, log *zap.Logger, noFDs *descriptorLog) *engineClient {
	tr := &http.Transport{
		Proxy:               nil, // engines are reached directly, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		// Below uvicorn's keep-alive timeout (5 s), which serves MLC's
		// engines: a POST on a connection the server has just closed
		// fails, and Go does not retry a POST.
		IdleConnTimeout:    engineIdleTimeout,
		DisableCompression: true,
	}
	return &engineClient{http: &http.Client{Transport: tr}, timeout: timeout, log: log, noFDs: noFDs}
}

// close drops idle connections.
func (c *engineClient) close() { c.http.CloseIdleConnections() }

// engineError is a failed call to an engine. retry says whether another
// attempt (possibly on another engine) may succeed; apiErr, when set, is
// the engine's own OpenAI error, passed to the client when no retry is
// made. preempted marks an engine that dropped the call for lack of KV
// memory: not a failure of the engine, and retried as a preemption.
// verdict is what the call says of the engine's health, bad why its
// answer was bad (verdictBadAnswer).
type engineError struct {
	op        string
	addr      string
	proc      string // the engine process (avoidKey): its restart is another
	retry     bool
	preempted bool
	timeout   bool
	prefill   bool // the prefill outran its allowance on an engine that answered its probes
	verdict   verdict
	bad       string
	apiErr    *protocol.Error
	err       error
}

// badAnswer is the error of a call the engine answered, but not as an
// engine must: retried, and a failure for the breaker.
func badAnswer(op string, t callee, reason string, err error) *engineError {
	return &engineError{op: op, addr: t.Addr(), proc: t.procKey(), retry: true, verdict: verdictBadAnswer, bad: reason, err: err}
}

func (e *engineError) Error() string {
	if e.apiErr != nil {
		return fmt.Sprintf("%s on %s: %d %s", e.op, e.addr, e.apiErr.Status, e.apiErr.Message)
	}
	return fmt.Sprintf("%s on %s: %v", e.op, e.addr, e.err)
}

func (e *engineError) Unwrap() error { return e.err }

// blames reports whether the error counts against the engine's health.
func (e *engineError) blames() bool {
	return e.retry && !e.preempted && !e.prefill && !errors.Is(e.err, errEngineDrained)
}

// errEngineSilent is the cause of a call cancelled by its watchdog.
var errEngineSilent = errors.New("engine timeout: no answer")

// call is one HTTP exchange with an engine under a watchdog: the context
// of the request is cancelled when the engine stays silent for the
// timeout, before its first byte or between two reads of the body. A
// whole (non-streamed) generation is silent until it is done, however
// long it takes: its watchdog instead checks, every timeout, that the
// engine still answers its health probes (same process, ready). A
// streamed generation still waiting for its first token is queued behind
// the engine's other work, not lost, while the engine gives other calls
// tokens (see bark).
type call struct {
	t      callee
	op     string
	ctx    context.Context
	cancel context.CancelCauseFunc
	dog    *watchdog.Dog
	quiet  time.Duration // the engine timeout
	kind   callKind
	moved  atomic.Bool // a token came
	// chatty: an event came that moved nothing. An engine prefilling
	// sends nothing, so a chatty one is not given a prefill's allowance.
	chatty atomic.Bool
	resp   *http.Response
	began  time.Time
	beat   atomic.Int64 // the last progress, after began (see progress)
	wait   *engineWait  // the choice's clock of time spent waiting on engines
	span   trace.Span   // the call's, when the request is traced
	// prefill is what the watchdog allows the engine's prefill, probing
	// it with probe (prefill.go); ended stops the watchdog's probes.
	prefill prefillPlan
	probe   *http.Client
	work    prefillWork
	ended   atomic.Bool
}

// callKind is what a call waits for.
type callKind int

const (
	callAnswer callKind = iota // a JSON answer: prep_recv, remote_send, a release
	callStream                 // a streamed generation
	callWhole                  // a generation answered at its end
)

// maxQueuedTimeouts bounds, in engine timeouts, the wait of a streamed
// generation for its first token on an engine busy with others.
const maxQueuedTimeouts = 4

// start posts body as JSON to path on the engine t; kind is what the
// call waits for.
func (c *engineClient) start(ctx context.Context, t callee, path string, body any, kind callKind) (*call, error) {
	op := strings.TrimPrefix(path, "/")
	b, err := protocol.AppendJSON(nil, body)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", op, err)
	}
	cl := &call{t: t, op: op, began: time.Now(), quiet: c.timeout, kind: kind, wait: engineWaitOf(ctx), prefill: prefillOf(ctx), probe: c.http}
	ctx, cl.span = startSpan(ctx, callName(ctx, op), attribute.String("mlc.engine", t.Addr()), attribute.String("mlc.call", op))
	cl.ctx, cl.cancel = context.WithCancelCause(ctx)
	cl.dog = watchdog.Start(cl.nextBark(), cl.bark)
	req, err := http.NewRequestWithContext(cl.ctx, http.MethodPost, t.baseURL()+path, bytes.NewReader(b))
	if err != nil {
		cl.end()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header["Content-Type"] = jsonContentType
	injectTrace(ctx, propagation.HeaderCarrier(req.Header))
	t0 := time.Now()
	resp, err := c.http.Do(req)
	cl.wait.since(t0)
	if err != nil {
		err = c.failure(cl, err)
		cl.fail(err)
		cl.end()
		return nil, err
	}
	cl.resp = resp
	if resp.StatusCode == http.StatusOK {
		// Alive; whether it served the call well is known only once
		// its answer was read.
		cl.progress()
		return cl, nil
	}
	defer cl.end()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxEngineErrorBody))
	apiErr := protocol.ParseError(resp.StatusCode, raw)
	if apiErr == nil {
		apiErr = protocol.Errorf(resp.StatusCode, protocol.ErrTypeServer, "engine answered %s: %s", resp.Status, bytes.TrimSpace(raw))
	}
	ee := &engineError{op: op, addr: t.Addr(), proc: t.procKey(), apiErr: apiErr, err: apiErr, verdict: verdictServed}
	switch {
	case apiErr.Code != nil && *apiErr.Code == protocol.FinishPreempt:
		ee.retry, ee.preempted = true, true // it answered: busy, not broken
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		// The engine's trouble: another attempt may succeed.
		ee.retry, ee.verdict = true, verdictFailed
	}
	// Otherwise it is about the request: it would fail anywhere.
	cl.fail(ee)
	return nil, ee
}

// progress tells the watchdog the engine is alive: it notes the time,
// which bark reads (a stream's tokens cost a clock read, not a timer's
// reset each).
func (cl *call) progress() { cl.beat.Store(int64(time.Since(cl.began))) }

// bark is the watchdog's: the engine was silent for the timeout, unless
// progress came since the timer was set. It returns when to look again,
// 0 once the call ended or was given up.
func (cl *call) bark() time.Duration {
	if cl.ended.Load() {
		return 0
	}
	if due := time.Duration(cl.beat.Load()) + cl.nextBark() - time.Since(cl.began); due > 0 {
		return due
	}
	switch {
	case cl.prefill.allow > 0 && cl.kind != callWhole && !cl.moved.Load() && !cl.chatty.Load():
		// A prompt being prefilled: working while the engine answers
		// its probes, until the allowance runs out.
		next, cause := cl.watchPrefill()
		if cause != nil {
			cl.cancel(cause)
		}
		return next
	case cl.kind == callWhole:
		if cl.t.alive() {
			return cl.quiet // still generating, by its health
		}
	case cl.kind == callStream && !cl.moved.Load():
		// The first token waits behind the engine's other work (the
		// prefills of the streams a lost engine left, say): busy, not
		// silent, while the engine gives other calls tokens. Giving up
		// would throw the call's place away, and move those streams on
		// together to wait the same elsewhere. It is given up once the
		// engine has been silent for the timeout, or after
		// maxQueuedTimeouts of them.
		busy := cl.quiet - time.Since(cl.t.lastToken())
		if busy > 0 && time.Since(cl.began) < maxQueuedTimeouts*cl.quiet {
			return busy
		}
	}
	cl.cancel(errEngineSilent)
	return 0
}

// failure turns a transport error into an engineError, telling a silent
// engine (its fault) from a caller that went away (nobody's).
func (c *engineClient) failure(cl *call, err error) error {
	ee := &engineError{op: cl.op, addr: cl.t.Addr(), proc: cl.t.procKey(), err: err}
	switch cause := context.Cause(cl.ctx); {
	case errors.Is(cause, errEngineSilent):
		ee.retry, ee.timeout = true, true
		ee.verdict, ee.bad = verdictBadAnswer, "no answer, or no token, within the engine timeout"
		ee.err = fmt.Errorf("%w for %v", errEngineSilent, time.Since(cl.began).Round(time.Millisecond))
	case errors.Is(cause, errPrefillOverrun):
		cl.overrun(ee)
	case errors.Is(cause, errEngineDrained):
		ee.retry, ee.err = true, cause // the engine's drain ended: it moves, nobody's fault
	case cause != nil:
		ee.err = cause // the client left or the attempt was given up
	case descriptors.Exhausted(err):
		return noDescriptors(c.log, c.noFDs, err) // the router's trouble, not the engine's
	default:
		ee.retry, ee.verdict = true, verdictFailed
	}
	return ee
}

// fail records err as the call's outcome in its span.
func (cl *call) fail(err error) {
	if cl.span.IsRecording() {
		cl.span.RecordError(err)
		cl.span.SetStatus(codes.Error, err.Error())
	}
}

// end stops the watchdog and releases the call's connection.
func (cl *call) end() {
	cl.ended.Store(true)
	cl.span.End()
	cl.dog.Stop()
	if cl.resp != nil {
		cl.resp.Body.Close()
	}
	cl.cancel(nil)
}

// post makes a non-streamed call and decodes its JSON answer into out. A
// nil error means the engine served the call.
func (c *engineClient) post(ctx context.Context, t callee, path string, body, out any) error {
	cl, err := c.start(ctx, t, path, body, callAnswer)
	if err != nil {
		return err
	}
	defer cl.end()
	t0 := time.Now()
	err = readJSON(cl.resp.Body, out)
	cl.wait.since(t0)
	if err != nil {
		if cl.ctx.Err() != nil {
			return c.failure(cl, err)
		}
		return badAnswer(cl.op, t, "malformed JSON answer", fmt.Errorf("decoding the answer: %w", err))
	}
	return nil
}

// readJSON decodes a small JSON answer (at most maxEngineErrorBody) into
// out. It reads to the body's end, not only to the value's: a body left
// unread costs its connection (see chunkStream.drain).
func readJSON(body io.Reader, out any) error {
	data, err := io.ReadAll(io.LimitReader(body, maxEngineErrorBody))
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// maxEngineAnswer bounds a whole generation's answer.
const maxEngineAnswer = 64 << 20

// generate makes a completion call and returns its chunks: the events of
// a stream, or, for a request that does not stream, its one answer (MLC's
// router makes one call for a client that does not stream: no chunk to
// rebuild the answer from). The caller closes the stream.
func (c *engineClient) generate(ctx context.Context, t callee, path string, body any, stream bool) (*chunkStream, error) {
	if stream {
		return c.stream(ctx, t, path, body)
	}
	return c.whole(ctx, t, path, body)
}

// whole makes a completion call answered at its end, and returns the
// answer as a stream of one chunk.
func (c *engineClient) whole(ctx context.Context, t callee, path string, body any) (*chunkStream, error) {
	cl, err := c.start(ctx, t, path, body, callWhole)
	if err != nil {
		return nil, err
	}
	var answer protocol.CompletionResponse
	t0 := time.Now()
	err = decodeAnswer(cl.resp.Body, &answer)
	cl.wait.since(t0)
	if err != nil {
		if cl.ctx.Err() != nil {
			err = c.failure(cl, err)
		} else {
			err = badAnswer(cl.op, t, "malformed JSON answer", fmt.Errorf("decoding the answer: %w", err))
		}
		cl.end()
		return nil, err
	}
	return &chunkStream{c: c, cl: cl, answer: &answer, matched: -1}, nil
}

// decodeAnswer reads a whole generation's answer: the common shape with
// the chunk scanner, anything else with encoding/json.
func decodeAnswer(body io.Reader, answer *protocol.CompletionResponse) error {
	data, err := io.ReadAll(io.LimitReader(body, maxEngineAnswer+1))
	switch {
	case err != nil:
		return err
	case len(data) > maxEngineAnswer:
		return fmt.Errorf("answer over %s", humanize.IBytes(maxEngineAnswer))
	case protocol.ScanCompletionChunk(data, answer):
		return nil
	}
	*answer = protocol.CompletionResponse{}
	return json.Unmarshal(data, answer)
}

// stream makes a streamed completion call and returns its chunks.
func (c *engineClient) stream(ctx context.Context, t callee, path string, body any) (*chunkStream, error) {
	cl, err := c.start(ctx, t, path, body, callStream)
	if err != nil {
		return nil, err
	}
	if ct := cl.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, protocol.ContentTypeEventStream) {
		cl.end()
		return nil, badAnswer(cl.op, t, "a stream answered with another content type", fmt.Errorf("answer is %q, not an event stream", ct))
	}
	return &chunkStream{c: c, cl: cl, sse: protocol.NewSSEReader(cl.resp.Body, 0), matched: -1}, nil
}

// chunkStream reads the completion chunks of an engine's event stream,
// or hands out the one answer of a whole generation.
type chunkStream struct {
	c   *engineClient
	cl  *call
	sse *protocol.SSEReader
	// last is the last chunk scanned, whose id, object, model and array
	// of choices the next chunk reuses (see protocol.ScanCompletionChunk).
	last     protocol.CompletionResponse
	answer   *protocol.CompletionResponse // a whole generation's, until handed out
	ended    bool                         // the stream's [DONE] came
	finished bool                         // a chunk carried a finish reason
	moved    bool                         // the last chunk showed the generation moving
	traced   int                          // text pieces seen, for a traced call (see traceChunk)
	// matched is the engine's early report of its prefix cache's match
	// (protocol.MatchedChunk), -1 before any.
	matched int
}

// complete reports that the engine answered the call in full: a whole
// answer, or a stream that ended with [DONE] after its finish reason.
func (s *chunkStream) complete() bool { return s.sse == nil || s.ended && s.finished }

// next returns the next chunk, io.EOF after [DONE], or an engineError when
// the stream breaks, falls silent or carries an error event. The chunk is
// valid until the next call (its usage stays valid). After a chunk, moved
// reports whether it showed the generation moving (see progress).
func (s *chunkStream) next() (*protocol.CompletionResponse, error) {
	s.moved = false
	if s.sse == nil {
		a := s.answer
		if a == nil {
			return nil, io.EOF
		}
		s.answer = nil
		return a, nil
	}
	t0 := time.Now()
	data, err := s.sse.Next()
	s.cl.wait.since(t0)
	t := s.cl.t
	if err != nil {
		if s.cl.ctx.Err() != nil {
			return nil, s.c.failure(s.cl, err)
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // an engine always ends with [DONE]
		}
		return nil, badAnswer("stream", t, "the stream broke off before [DONE]", err)
	}
	if protocol.IsDone(data) {
		s.ended = true
		if !s.finished {
			return nil, badAnswer("stream", t, "the stream ended without a finish reason", errors.New("stream ended without a finish reason"))
		}
		return nil, io.EOF
	}
	if protocol.ScanCompletionChunk(data, &s.last) {
		s.progress(&s.last)
		return &s.last, nil
	}
	// One decode for the other shapes: a chunk, or the error event that
	// ends the stream.
	var chunk engineChunk
	if err := json.Unmarshal(data, &chunk); err != nil {
		return nil, badAnswer("stream", t, "a malformed event in the stream", fmt.Errorf("bad chunk: %w", err))
	}
	if chunk.Error != nil {
		apiErr := protocol.ParseError(http.StatusBadGateway, data)
		if apiErr == nil {
			apiErr = protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "engine stream error: %s", chunk.Error)
		}
		return nil, &engineError{op: "stream", addr: t.Addr(), proc: t.procKey(), retry: true, apiErr: apiErr, err: apiErr}
	}
	if n := chunk.PrefixMatchedLength; n != nil && *n >= 0 && s.matched < 0 {
		s.matched = *n
	}
	s.progress(&chunk.CompletionResponse)
	return &chunk.CompletionResponse, nil
}

// progress feeds the watchdog a chunk that shows the generation moving:
// text, a token's logprobs, a finish reason or the final usage. Anything
// else (events without choices, empty deltas) is chatter, which an
// engine could send forever without generating: the watchdog is about
// progress, not bytes.
func (s *chunkStream) progress(c *protocol.CompletionResponse) {
	moved := c.Usage != nil
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.FinishReason != nil {
			s.finished = true
		}
		moved = moved || ch.Text != "" || ch.FinishReason != nil || ch.Logprobs.Len() > 0
	}
	if !moved {
		s.cl.chatty.Store(true)
	}
	if moved {
		if s.traced == 0 && s.cl.span.IsRecording() && s.firstText(c) {
			s.cl.span.AddEvent("first token")
		}
		s.moved = true
		s.cl.moved.Store(true)
		s.cl.progress()
	}
	if s.cl.span.IsRecording() {
		s.traceChunk(c)
	}
}

// firstText reports that c carries text.
func (s *chunkStream) firstText(c *protocol.CompletionResponse) bool {
	for i := range c.Choices {
		if c.Choices[i].Text != "" {
			return true
		}
	}
	return false
}

// traceChunk records a chunk in the call's span: the text pieces (an
// engine sends one a token), the finish reason, the usage.
func (s *chunkStream) traceChunk(c *protocol.CompletionResponse) {
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Text != "" {
			s.traced++
		}
		if ch.FinishReason != nil {
			s.cl.span.SetAttributes(attribute.String("mlc.finish_reason", *ch.FinishReason))
		}
	}
	s.cl.span.SetAttributes(attribute.Int("mlc.tokens", s.traced))
	if c.Usage != nil {
		s.cl.span.SetAttributes(attribute.Int("mlc.prompt_tokens", c.Usage.PromptTokens), attribute.Int("mlc.completion_tokens", c.Usage.CompletionTokens))
	}
}

// drainTimeout bounds the wait for the end of a stream's body after its
// [DONE] event; drainBytes how much of it is read.
const (
	drainTimeout = 50 * time.Millisecond
	drainBytes   = 4 << 10
)

// drain reads the body of a stream that sent [DONE] to its end. The
// engine ends the body right after that event, but usually in a later
// write than the event's, and a body closed before its end costs its
// connection: Go's transport drops it, and the next call dials again and
// waits for the engine to accept it (a sequential stream lost its
// connection about every other request, which under load showed as time
// to first token). The wait is short: in a bench run on saturated
// engines 99.7% of 2,086 drains took under 0.5 ms and the longest 6 ms.
// An engine that keeps the body open past [DONE] loses the connection
// after drainTimeout, as before.
func (s *chunkStream) drain() {
	s.cl.dog.Reset(drainTimeout)
	_, _ = io.CopyN(io.Discard, s.cl.resp.Body, drainBytes)
}

// engineChunk is an event of an engine's stream: a completion chunk, or
// an error.
type engineChunk struct {
	protocol.CompletionResponse
	Error json.RawMessage `json:"error"`
	// PrefixMatchedLength is the built-in engine's early report of its
	// prefix cache's match (protocol.MatchedChunk).
	PrefixMatchedLength *int `json:"prefix_matched_length"`
}

// pending reports that the next chunk has already arrived: the caller
// need not flush what it wrote for this one yet.
func (s *chunkStream) pending() bool { return s.sse != nil && s.sse.Buffered() }

// close ends the stream, which cancels the engine's request if it still
// runs.
func (s *chunkStream) close() {
	if s.ended {
		s.drain()
	}
	s.cl.end()
	if s.sse != nil {
		s.sse.Release()
	}
}
