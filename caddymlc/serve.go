package caddymlc

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// ServeHTTP serves the OpenAI-compatible API and passes every other request
// to the next handler. The engines' own microserving endpoints are never
// reachable through the router.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request, next caddyhttp.Handler) error {
	switch path := req.URL.Path; {
	case path == "/v1/completions":
		if !allowMethod(w, req, http.MethodPost) {
			return nil
		}
		r.serveCompletion(w, req)
		return nil
	case path == protocol.PathChatCompletions:
		if !allowMethod(w, req, http.MethodPost) {
			return nil
		}
		r.serveChat(w, req)
		return nil
	case path == "/v1/models":
		if !allowMethod(w, req, http.MethodGet, http.MethodHead) {
			return nil
		}
		writeJSON(w, http.StatusOK, protocol.NewModelList(time.Now().Unix(), "caddy-mlc", r.Model))
		return nil
	case strings.HasPrefix(path, "/microserving/"):
		protocol.Errorf(http.StatusNotFound, protocol.ErrTypeNotFound, "%s is not served here", path).Write(w)
		return nil
	}
	return next.ServeHTTP(w, req)
}

func allowMethod(w http.ResponseWriter, req *http.Request, methods ...string) bool {
	for _, m := range methods {
		if req.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	protocol.Errorf(http.StatusMethodNotAllowed, protocol.ErrTypeInvalidRequest, "method %s is not allowed on %s", req.Method, req.URL.Path).Write(w)
	return false
}

// serveCompletion is MLC's handle_completion: decode and validate, tokenize
// a string prompt, then run the request's attempts.
func (r *Router) serveCompletion(w http.ResponseWriter, hreq *http.Request) {
	r.serve(w, hreq, "cmpl-", r.prepareCompletion, completionSink)
}

// serve turns a request into a completion with prepare, then runs it,
// writing the answer with the sink mk makes.
func (r *Router) serve(w http.ResponseWriter, hreq *http.Request, idPrefix string,
	prepare func(*http.Request) (*protocol.CompletionRequest, []int, *protocol.Error), mk sinkMaker) {
	begin := time.Now()
	req, prompt, apiErr := prepare(hreq)
	if apiErr != nil {
		r.metrics.requests.WithLabelValues(r.Mode, "client_error").Inc()
		apiErr.Write(w)
		return
	}
	c := r.newCompletion(idPrefix, req, prompt)
	r.run(hreq, c, mk(w, c.id, r.Model, req), begin)
}

// prepareCompletion decodes a completion request and returns its prompt
// ids, tokenizing a string prompt.
func (r *Router) prepareCompletion(hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	req, apiErr := protocol.DecodeCompletionRequest(hreq.Body, r.maxBody())
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if e := r.needsTokenizer(req); e != nil {
		return nil, nil, e
	}
	if !req.Prompt.IsText {
		return req, req.Prompt.IDs, nil
	}
	prompt := r.tok.Encode(req.Prompt.Text)
	if len(prompt) == 0 {
		return nil, nil, protocol.InvalidRequest("prompt", "prompt encodes to no tokens")
	}
	return req, prompt, nil
}

// needsTokenizer refuses what cannot be served without a tokenizer.
func (r *Router) needsTokenizer(req *protocol.CompletionRequest) *protocol.Error {
	switch {
	case r.tok != nil:
		return nil
	case req.Prompt.IsText:
		return r.noTokenizer("prompt", "a string prompt")
	case req.Echo:
		return r.noTokenizer("echo", "echo")
	}
	return nil
}

func (r *Router) newCompletion(idPrefix string, req *protocol.CompletionRequest, prompt []int) *completion {
	id := newID(idPrefix)
	return &completion{r: r, id: id, req: req, prompt: prompt, log: r.logger.With(zap.String("request_id", id))}
}

// run serves c to out, then logs and counts it.
func (r *Router) run(hreq *http.Request, c *completion, out sink, begin time.Time) {
	rec := &outcomeSink{sink: out}
	st := c.run(hreq.Context(), rec)
	r.record(c, c.req, rec, st, begin)
}

// record logs and counts a finished request.
func (r *Router) record(c *completion, req *protocol.CompletionRequest, rec *outcomeSink, st stats, begin time.Time) {
	outcome := rec.outcome()
	r.metrics.requests.WithLabelValues(r.Mode, outcome).Inc()
	r.metrics.tokens.Add(float64(st.tokens))
	if st.firstToken > 0 {
		r.metrics.ttft.Observe(st.firstToken.Seconds())
	}
	fields := []zap.Field{
		zap.String("outcome", outcome), zap.Int("prompt_tokens", len(c.prompt)), zap.Int("completion_tokens", st.tokens),
		zap.Int("attempts", st.attempts), zap.Int("preemptions", st.preemptions),
		zap.String("duration", time.Since(begin).Round(time.Millisecond).String()),
		zap.String("time_to_first_token", st.firstToken.Round(time.Millisecond).String()),
	}
	if req.User != nil {
		fields = append(fields, zap.String("user", *req.User))
	}
	if rec.err != nil {
		fields = append(fields, zap.String("error", rec.err.Message))
	}
	r.logger.Info("completion", append(fields, zap.String("id", c.id))...)
}

func (r *Router) maxBody() int64 {
	return r.MaxBodySize
}

// outcomeSink remembers how a response ended, for logs and metrics.
type outcomeSink struct {
	sink
	err *protocol.Error
}

func (o *outcomeSink) fail(err *protocol.Error) {
	o.err = err
	o.sink.fail(err)
}

func (o *outcomeSink) outcome() string {
	switch {
	case o.err == nil:
		return "ok"
	case o.err.Status == 499:
		return "canceled"
	case o.err.Status == http.StatusServiceUnavailable:
		return "unavailable"
	case o.err.Status < 500:
		return "client_error"
	}
	return "failed"
}

// newID returns a request id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
