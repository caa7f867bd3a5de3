package builtin

import (
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// maxTransferBytes bounds a kv_transfer body.
const maxTransferBytes = 1 << 30

// server is the engine's HTTP API.
type server struct {
	e       *Engine
	world   *world
	client  *http.Client
	created int64
}

func newServer(e *Engine, w *world) *server {
	return &server{e: e, world: w, client: &http.Client{}, created: time.Now().Unix()}
}

// route is one endpoint.
type route struct {
	method  string
	handler http.HandlerFunc
}

// handler returns the engine's HTTP handler.
func (s *server) handler() http.Handler {
	routes := map[string]route{
		protocol.PathModels:          {http.MethodGet, s.models},
		protocol.PathCompletions:     {http.MethodPost, s.completions},
		protocol.PathChatCompletions: {http.MethodPost, s.chatCompletions},
		protocol.PathEmbeddings:      {http.MethodPost, s.embeddings},
		protocol.PathPrepRecv:        {http.MethodPost, s.prepRecvEndpoint},
		protocol.PathRemoteSend:      {http.MethodPost, s.remoteSendEndpoint},
		protocol.PathStartGenerate:   {http.MethodPost, s.startGenerateEndpoint},
		protocol.PathRelease:         {http.MethodPost, s.releaseEndpoint},
		PathKVTransfer:               {http.MethodPost, s.kvTransfer},
		protocol.PathSlowness:        {http.MethodPost, s.slownessEndpoint},
		"/metrics":                   {http.MethodGet, metricsHandler(s.e).ServeHTTP},
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		rt, ok := routes[r.URL.Path]
		switch {
		case !ok:
			protocol.Errorf(http.StatusNotFound, protocol.ErrTypeNotFound, "no such endpoint: %s", r.URL.Path).Write(w)
		case r.Method != rt.method:
			w.Header().Set("Allow", rt.method)
			protocol.Errorf(http.StatusMethodNotAllowed, protocol.ErrTypeInvalidRequest, "%s takes %s, not %s", r.URL.Path, rt.method, r.Method).Write(w)
		default:
			rt.handler(w, r)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" {
			s.traced(serve, w, r)
			return
		}
		serve(w, r)
	})
}

// traced serves a request that carries a W3C traceparent (the router's
// call of a traced request) and writes its request line with it, so that
// a trace leads to the engine's log: "POST /microserving/prep_recv 200
// 3.1ms traceparent=00-...".
func (s *server) traced(h http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	begin := time.Now()
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	h(sw, r)
	s.e.logf("%s %s %d %v traceparent=%s", r.Method, r.URL.Path, sw.status, time.Since(begin).Round(time.Microsecond), r.Header.Get("traceparent"))
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes a streamed answer.
func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// models answers GET /v1/models: the model, then the embedding model,
// as MLC's server lists them.
func (s *server) models(w http.ResponseWriter, r *http.Request) {
	ids := []string{s.e.opts.Model}
	if s.e.emb != nil {
		ids = append(ids, s.e.emb.id)
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.NewModelList(s.created, "caddy-mlc", ids...))
}

// completions answers POST /v1/completions.
func (s *server) completions(w http.ResponseWriter, r *http.Request) {
	req, perr := protocol.DecodeEngineRequest(r.Body, 0)
	if perr != nil {
		perr.Write(w)
		return
	}
	if !s.e.opts.EnableDebug {
		req.DebugConfig = nil
	}
	s.dispatch(w, r, req)
}

// dispatch runs a completion request by its debug_config.
func (s *server) dispatch(w http.ResponseWriter, r *http.Request, req *protocol.CompletionRequest) {
	dc := req.DebugConfig
	if dc != nil && dc.SpecialRequest != nil && *dc.SpecialRequest == protocol.SpecialQueryEngineMetrics {
		s.metricsCompletion(w, req)
		return
	}
	if dc == nil || dc.DisaggConfig == nil || dc.DisaggConfig.Kind == "" {
		s.generate(w, r, req, "", 0, s.completionAnswer(req))
		return
	}
	switch dc.DisaggConfig.Kind {
	case protocol.DisaggPrepareReceive:
		s.prepRecvCompletion(w, r, req)
	case protocol.DisaggRemoteSend:
		s.remoteSendCompletion(w, r, req)
	case protocol.DisaggStartGeneration:
		s.startGeneration(w, r, req)
	default:
		protocol.InvalidRequest("debug_config", "unknown disagg_config.kind %q", dc.DisaggConfig.Kind).Write(w)
	}
}

// answerFunc shapes the answer of a request once it is made.
type answerFunc func(*request) answer

// completionAnswer answers req as a completion.
func (s *server) completionAnswer(req *protocol.CompletionRequest) answerFunc {
	return func(cr *request) answer { return completionAnswer{s, req, cr} }
}

// generate runs a completion and answers it as shape says; with a user,
// generation starts at begin on that user's prep_recv reservation.
func (s *server) generate(w http.ResponseWriter, r *http.Request, req *protocol.CompletionRequest, user string, begin int, shape answerFunc) {
	cr, perr := s.newRequest(req, user)
	if perr != nil {
		perr.Write(w)
		return
	}
	err := s.e.do(func() {
		if user != "" {
			if perr = s.e.attachPrepared(cr, user, begin); perr != nil {
				return
			}
		}
		s.e.submit(cr)
	})
	if err != nil {
		perr = unavailable(err)
	}
	if perr != nil {
		perr.Write(w)
		return
	}
	if req.Stream {
		s.stream(w, r.Context(), cr, shape(cr), req.IncludeUsage())
	} else {
		s.collect(w, r.Context(), cr, shape(cr))
	}
}

// abort cancels cr on the scheduler.
func (s *server) abort(cr *request) { _ = s.e.do(func() { s.e.abort(cr) }) }

// newRequest tokenizes and resolves a completion request.
func (s *server) newRequest(req *protocol.CompletionRequest, user string) (*request, *protocol.Error) {
	tokens, perr := s.tokenize(req.Prompt)
	if perr != nil {
		return nil, perr
	}
	p, perr := s.params(req)
	if perr != nil {
		return nil, perr
	}
	id := user
	if id == "" {
		id = protocol.NewID("")
	}
	cr := &request{id: id, prompt: tokens, params: p, events: newEventQueue(), arrival: arrivalOf(req.Arrival)}
	for i := range p.n {
		seq := &sequence{
			req: cr, index: i, tokens: append([]int(nil), tokens...),
			sampler: newSampler(&cr.params, s.e.allowed, i),
			out:     s.e.newOutput(p.stop),
		}
		if p.format != nil {
			if seq.gram, perr = s.e.grammars.newConstraint(p.format, tokens); perr != nil {
				return nil, perr
			}
		}
		cr.seqs = append(cr.seqs, seq)
	}
	return cr, nil
}

// tokenize returns the prompt's token ids.
func (s *server) tokenize(p protocol.Prompt) ([]int, *protocol.Error) {
	ids := p.IDs
	if p.IsText {
		ids = s.e.tok.Encode(p.Text)
	}
	vocab := s.e.vocab
	for i, id := range ids {
		if id >= vocab {
			return nil, protocol.InvalidRequest("prompt", "prompt[%d]: token id %d is outside the vocabulary of %d", i, id, vocab)
		}
	}
	if len(ids) == 0 {
		return nil, protocol.InvalidRequest("prompt", "prompt encodes to no tokens")
	}
	if perr := s.e.checkPromptLength(len(ids), "prompt"); perr != nil {
		return nil, perr
	}
	return ids, nil
}

// unavailable is the answer while the engine shuts down.
func unavailable(err error) *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "%v", err)
}
