package router

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// apiPrefix is the prefix of every path of the OpenAI API. The router
// answers every path under it, the ones it does not serve with a 404, so
// that a client's typo (/v1/completion) is an error it can read, not
// whatever the next handler makes of it.
const apiPrefix = "/v1/"

// ownedBy is the owned_by of the served model.
const ownedBy = "caddy-mlc"

// Handles reports whether the router answers path: the OpenAI API under
// /v1/ (its unknown paths with a 404) and the engines' microserving paths
// (always a 404). Everything else belongs to the next handler.
func Handles(path string) bool {
	return strings.HasPrefix(path, apiPrefix) || path+"/" == apiPrefix || strings.HasPrefix(path, protocol.PathMicroserving)
}

func allowMethod(w http.ResponseWriter, req *http.Request, methods ...string) bool {
	if slices.Contains(methods, req.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	protocol.Errorf(http.StatusMethodNotAllowed, protocol.ErrTypeInvalidRequest, "method %s is not allowed on %s", req.Method, req.URL.Path).Write(w)
	return false
}

// modelNotFound is OpenAI's answer to a model it does not serve, naming
// the served ones (chat, then embedding models); the type is OpenAI's too
// (invalid_request_error), so that clients that branch on it see what
// they know. An embedding model's name asked for a completion is told
// apart.
func modelNotFound(id string, chat, embedding []string) *protocol.Error {
	quote := func(names []string) string {
		quoted := make([]string, len(names))
		for i, s := range names {
			quoted[i] = strconv.Quote(s)
		}
		return strings.Join(quoted, ", ")
	}
	msg := fmt.Sprintf("the model %q does not exist: this server serves %s", id, quote(append(slices.Clip(chat), embedding...)))
	if slices.Contains(embedding, id) {
		msg = fmt.Sprintf("the model %q is an embedding model, served at %s only: this server's chat models are %s", id, protocol.PathEmbeddings, quote(chat))
	}
	e := protocol.Errorf(http.StatusNotFound, protocol.ErrTypeInvalidRequest, "%s", msg).WithCode(protocol.CodeModelNotFound)
	e.Param = new("model")
	return e
}

// api is a generation API the router serves: how a request is turned into
// the completion that answers it (the request, the prompt's token ids, or
// the error the client gets), and how the answer is written.
type api struct {
	idPrefix string
	// endpoint names the API in the metrics (caddy_mlc_requests_total's
	// endpoint label).
	endpoint string
	prepare  func(*decoder, *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error)
	sink     sinkMaker
	// writeError answers an error before any engine is asked, in the
	// API's shape; nil: OpenAI's.
	writeError func(http.ResponseWriter, *protocol.Error)
	// next, when set, makes the answer several rounds of the model (the
	// Responses API's hosted tools): it is the request of the next
	// round, asked after each round (and before the first, when prepare
	// returned none), or nil when the answer is done.
	next func(context.Context, *decoder) (*protocol.CompletionRequest, []int, *protocol.Error)
}

// The generation APIs: completions and chat completions, which builds on
// it; Anthropic's Messages API and OpenAI's Responses API build on chat
// (messages.go, responses.go). embeddingsAPI only names its endpoint.
var (
	completionsAPI = api{idPrefix: "cmpl-", endpoint: "completions", prepare: (*decoder).prepareCompletion, sink: completionSink}
	chatAPI        = api{idPrefix: "chatcmpl-", endpoint: "chat", prepare: (*decoder).prepareChat, sink: chatSink}
	embeddingsAPI  = api{endpoint: "embeddings"}
)

// serve is MLC's handle_completion: it prepares a request as its API
// does (decode, validate, tokenize), admits it, runs its choices'
// attempts, and writes the answer with the API's sink. An API whose
// answer takes several rounds of the model (a.next: the Responses API's
// hosted tools) has each round admitted, run and recorded so, its text
// going on in the one answer (rounds.go).
func (r *Router) serve(w http.ResponseWriter, hreq *http.Request, a api) {
	begin := time.Now()
	hreq, cancel := r.withRequestTimeout(hreq)
	defer cancel()
	req, prompt, apiErr := r.prepare(w, hreq, a)
	if apiErr != nil {
		r.refuse(w, hreq, a, apiErr)
		return
	}
	sw := newStallWriter(w, time.Duration(r.ClientTimeout))
	defer sw.end()
	sw.lift() // a request waiting or being worked on is bounded by its own timeouts, not the server's
	var rec *outcomeSink
	for req != nil {
		req.Model = r.Path // what the engines are told; the answers say r.Model
		if v := r.sessionHeader(hreq); v != "" {
			req.SessionKey = v
		}
		f := factsOf(hreq.Context())
		c := r.newCompletion(a.idPrefix, req, prompt, begin)
		earlier := rec
		rec = &outcomeSink{sink: r.answerSink(sw, a, c.id, req)}
		g, err := r.gate.admit(hreq.Context(), w, f, len(prompt), r.cost(len(prompt), req), begin,
			func() (stop func()) { return rec.keepAlive(r.KeepAlive) })
		if err != nil {
			r.attain.record(r.metrics, r.Model, f, false)
			r.refuseRound(w, hreq, a, rec, earlier != nil, answerOf(timedOut(hreq.Context(), err)))
			return
		}
		c.facts, c.admitWait = f, g.waited
		stopKeepAlive := rec.keepAlive(r.KeepAlive)
		st := c.run(hreq.Context(), rec)
		r.gate.done(hreq.Context(), g, int64(len(prompt)+st.tokens), budgetCost(len(prompt), st.cached, st.tokens, r.cachedWeight()))
		if sw.stalled {
			r.metrics.dropped.WithLabelValues(dropStalled).Inc()
			c.log.Debug("the client accepted no byte for client_timeout: let go", zap.Duration("client_timeout", time.Duration(r.ClientTimeout)))
		}
		r.record(hreq, a, c, rec, st, begin)
		stopKeepAlive()
		if begin = time.Now(); a.next == nil || rec.outcome() != "ok" {
			return
		}
		if req, prompt, apiErr = r.nextRound(hreq, a); apiErr != nil {
			r.failAnswer(hreq, a, rec, apiErr)
			return
		}
	}
}

// prepare decodes and checks a request as its API prepares it, the body
// read within the body timeout; an API with work before its first round
// (a.next) does it once the body is read.
func (r *Router) prepare(w http.ResponseWriter, hreq *http.Request, a api) (*protocol.CompletionRequest, []int, *protocol.Error) {
	lift := r.dec.readDeadline(w)
	req, prompt, apiErr := a.prepare(&r.dec, hreq)
	if apiErr == nil || apiErr.Status != http.StatusRequestTimeout {
		lift()
	}
	if apiErr == nil && req == nil {
		req, prompt, apiErr = a.next(hreq.Context(), &r.dec)
	}
	if apiErr == nil {
		apiErr = r.checkRequest(prompt, req)
	}
	return req, prompt, apiErr
}

// checkRequest applies the model's bounds to a request before it is
// admitted: max_tokens, the context, the prefill time.
func (r *Router) checkRequest(prompt []int, req *protocol.CompletionRequest) *protocol.Error {
	apiErr := r.boundMaxTokens(len(prompt), req)
	if apiErr == nil {
		apiErr = protocol.CheckContext(len(prompt), req.MaxTokens, r.dec.context)
	}
	if apiErr == nil {
		apiErr = r.checkPrefillTime(len(prompt), r.leastUncached(prompt), r.gate.predict)
	}
	return apiErr
}

// boundMaxTokens applies the model's bounds to a request's max_tokens:
// DefaultMaxTokens when it sends none (else MaxTokensLimit, which bounds
// every request), MaxTokensLimit, and what the context leaves after the
// prompt. A max_tokens above either bound is
// capped to it, as agent clients expect of a model with a smaller
// context than the one they were written for (Claude Code asks for
// 32,000); the answer then ends by length as any other. With
// RefuseMaxTokens it is refused instead (CheckContext refuses one beyond
// the context).
func (r *Router) boundMaxTokens(prompt int, req *protocol.CompletionRequest) *protocol.Error {
	if req.MaxTokens == nil {
		switch {
		case r.DefaultMaxTokens > 0:
			req.MaxTokens = new(r.DefaultMaxTokens)
		case r.MaxTokensLimit > 0:
			req.MaxTokens = new(r.MaxTokensLimit)
		default:
			return nil // the rest of the context, as MLC's engines generate
		}
	}
	if limit := r.MaxTokensLimit; limit > 0 && *req.MaxTokens > limit {
		if r.RefuseMaxTokens {
			return protocol.InvalidRequest("max_tokens", "max_tokens is at most %d for model %s, got %d", limit, r.Model, *req.MaxTokens).WithCode(protocol.CodeIntegerAboveMax)
		}
		req.MaxTokens = new(limit)
	}
	if !r.RefuseMaxTokens && r.dec.context > 0 && prompt < r.dec.context && *req.MaxTokens > r.dec.context-prompt {
		req.MaxTokens = new(r.dec.context - prompt)
	}
	return nil
}

// answerSink is the sink of a request of API a: the API's, behind the
// reader of tool calls when the request offered tools, behind the reader
// of the model's reasoning when the API writes it apart (Messages'
// thinking blocks). The tools the
// fleet left out of the prompt are named in a header, before anything
// is written.
// Only the chat-based APIs offer tools, and their sinks write calls; the
// format was checked when the router was made (toolFormatOf).
func (r *Router) answerSink(w http.ResponseWriter, a api, id string, req *protocol.CompletionRequest) sink {
	if len(req.SkippedTools) > 0 {
		w.Header().Set(HeaderToolsSkipped, strings.Join(req.SkippedTools, ", "))
	}
	out := a.sink(w, id, r.Model, req)
	_, thinks := out.(thoughtSink)
	if cs, ok := out.(callSink); ok && req.ToolCalling != nil {
		out = newToolCallSink(cs, req.ToolCalling.Format, req.NOr(), r.metrics.toolCalls.WithLabelValues(r.Model, a.endpoint))
	}
	if thinks && req.Reasoning {
		out = newThinkingSink(out, req.NOr())
	}
	return out
}

// toolCallsOf is the number of tool calls the sink s read out of the
// answer (0: it reads none).
func toolCallsOf(s sink) int {
	if t, ok := s.(*thinkingSink); ok {
		s = t.out
	}
	t, ok := s.(*toolCallSink)
	if !ok {
		return 0
	}
	n := 0
	for _, c := range t.called {
		n += c
	}
	return n
}

// HeaderToolsSkipped names, on an answer, the tools of the request that
// the fleet left out of the prompt because it cannot run them (OpenAI's
// web search, file search and MCP tools, Anthropic's server tools…).
const HeaderToolsSkipped = "X-Mlc-Tools-Skipped"

// cost is what a request may cost in tokens, what the gate and budgets
// reserve: its prompt, and for each choice max_tokens, or, without it,
// the rest of the context (when known).
func (r *Router) cost(prompt int, req *protocol.CompletionRequest) int64 {
	gen := 0
	switch {
	case req.MaxTokens != nil:
		gen = *req.MaxTokens
	case r.dec.context > 0:
		gen = max(r.dec.context-prompt, 0)
	}
	return int64(prompt + req.NOr()*gen)
}

// refuse answers a request of API a with apiErr before any engine was
// asked, counted and published as its outcome.
func (r *Router) refuse(w http.ResponseWriter, hreq *http.Request, a api, apiErr *protocol.Error) {
	outcome := outcomeOf(apiErr)
	r.metrics.requests.WithLabelValues(r.Model, r.Mode, a.endpoint, outcome).Inc()
	r.vars(hreq.Context(), VarOutcome, outcome)
	if apiErr.Status == http.StatusRequestTimeout {
		// The body is still coming: the connection is closed after the
		// answer.
		r.metrics.dropped.WithLabelValues(dropSlowBody).Inc()
		w.Header().Set("Connection", "close")
	}
	if a.writeError != nil {
		a.writeError(w, apiErr)
		return
	}
	apiErr.Write(w)
}

func (r *Router) newCompletion(idPrefix string, req *protocol.CompletionRequest, prompt []int, begin time.Time) *completion {
	id := protocol.NewID(idPrefix)
	// WithLazy: most requests log nothing, and With encodes its fields
	// (a copy of the encoder) at once.
	return &completion{r: r, id: id, req: req, prompt: prompt, begin: begin, log: r.logger.WithLazy(zap.String("request_id", id))}
}

// The facts of a served request the router publishes (Options.SetVar):
// Caddy's request variables, so that access logs (log_append mlc_engine
// mlc_engine) and later handlers can use them.
const (
	VarRequestID        = "mlc_request_id"
	VarOutcome          = "mlc_outcome"           // ok, client_error, unavailable, failed or canceled
	VarEngine           = "mlc_engine"            // the engines that generated, comma-separated
	VarAttempts         = "mlc_attempts"          // attempts of every choice together
	VarPreemptions      = "mlc_preemptions"       // attempts an engine preempted
	VarPromptTokens     = "mlc_prompt_tokens"     // tokens of the prompt
	VarCachedTokens     = "mlc_cached_tokens"     // of them, reused from an engine's prefix cache (see cachedtokens.go)
	VarCompletionTokens = "mlc_completion_tokens" // tokens delivered to the client
	VarTenant           = "mlc_tenant"            // who the request is for (see Facts)
	VarToolCalls        = "mlc_tool_calls"        // tool calls read out of the answer
)

// record logs, counts and publishes (as request variables) a finished
// request.
func (r *Router) record(hreq *http.Request, a api, c *completion, rec *outcomeSink, st stats, begin time.Time) {
	outcome := rec.outcome()
	r.metrics.requests.WithLabelValues(r.Model, r.Mode, a.endpoint, outcome).Inc()
	r.metrics.tokens.Add(float64(st.tokens))
	if st.firstToken > 0 {
		st.ownTime = max(st.ownTime-c.admitWait, 0) // the gate's wait is the engines', not the router's work
		r.metrics.ttft.WithLabelValues(r.Model, r.Mode).Observe(st.firstToken.Seconds())
		r.metrics.ownTime.WithLabelValues(r.Model, r.Mode).Observe(st.ownTime.Seconds())
	}
	engines := strings.Join(st.engines, ",")
	ctx := hreq.Context()
	r.vars(ctx, VarRequestID, c.id)
	r.vars(ctx, VarOutcome, outcome)
	r.vars(ctx, VarEngine, engines)
	r.vars(ctx, VarAttempts, st.attempts)
	r.vars(ctx, VarPreemptions, st.preemptions)
	r.vars(ctx, VarPromptTokens, len(c.prompt))
	r.vars(ctx, VarCachedTokens, max(st.cached, 0))
	if rec.err == nil {
		r.metrics.cache.countCached(r.Model, len(c.prompt), st.cached)
	}
	r.vars(ctx, VarCompletionTokens, st.tokens)
	r.vars(ctx, VarTenant, c.facts.Tenant)
	calls := toolCallsOf(rec.sink)
	r.vars(ctx, VarToolCalls, calls)
	if calls > 0 {
		trace.SpanFromContext(ctx).SetAttributes(attribute.Int("mlc.tool_calls", calls))
	}
	fields := []zap.Field{
		zap.String("endpoint", a.endpoint), zap.String("outcome", outcome), zap.String("engine", engines),
		zap.Int("prompt_tokens", len(c.prompt)), zap.Int("cached_tokens", st.cached), zap.Int("completion_tokens", st.tokens),
		zap.Int("attempts", st.attempts), zap.Int("preemptions", st.preemptions), zap.Int("tool_calls", calls),
		zap.Duration("duration", time.Since(begin)), zap.Duration("time_to_first_token", st.firstToken),
		zap.Duration("router_time_to_first_token", st.ownTime),
	}
	if c.req.User != nil {
		fields = append(fields, zap.String("user", *c.req.User))
	}
	if st.expected >= 0 {
		fields = append(fields, zap.Int("expected_cached_tokens", st.expected))
	}
	if c.req.SessionKey != "" {
		fields = append(fields, zap.String("session", SessionLabel(sessionID(c.req.SessionKey))))
	}
	if c.facts != (Facts{}) {
		fields = append(fields, zap.String("tenant", c.facts.Tenant), zap.Int("band", c.facts.Band), zap.Duration("admission_wait", c.admitWait))
	}
	if rec.err != nil {
		fields = append(fields, zap.String("error", rec.err.Message))
	}
	ok := met(c.facts.Targets, rec.err == nil, st.firstToken, time.Since(begin), st.tokens)
	r.attain.record(r.metrics, r.Model, c.facts, ok)
	fields = append(fields, sloFields(c.facts.Targets, ok)...)
	c.log.Debug("completion", fields...)
}

// outcomeSink is the one way to a request's sink: it serialises the
// calls of the choices' goroutines and remembers how the response ended,
// for logs and metrics.
type outcomeSink struct {
	mu   sync.Mutex
	sink sink
	err  *protocol.Error
	// ka is the stream's keep-aliver while keepAlive runs; active is when
	// it last wrote (written its count of frames then), ended that the
	// answer did, kept that a keep-alive went out (see keepAlive).
	ka      keepAliver
	written int64
	active  time.Time
	ended   bool
	kept    bool
}

func (o *outcomeSink) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	err := o.sink.delta(index, text, logprobs)
	o.noteWritten()
	return err
}

func (o *outcomeSink) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sink.flush()
	o.noteWritten()
}

func (o *outcomeSink) finish(index int, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sink.finish(index, reason)
	o.noteWritten()
}

func (o *outcomeSink) done(usage protocol.Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.sink.done(usage)
}

func (o *outcomeSink) fail(err *protocol.Error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.err = err
	o.sink.fail(err)
}

func (o *outcomeSink) outcome() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return outcomeOf(o.err)
}

// outcomeOf names how a request that ended with err (nil: answered)
// ended, as caddy_mlc_requests_total counts it.
func outcomeOf(err *protocol.Error) string {
	switch {
	case err == nil:
		return "ok"
	case err.Status == protocol.StatusClientClosedRequest:
		return "canceled"
	case err.Status == http.StatusServiceUnavailable:
		return "unavailable"
	case err.Status < 500:
		return "client_error"
	}
	return "failed"
}
