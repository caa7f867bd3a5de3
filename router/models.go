package router

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
	"github.com/caddy-mlc/caddy-mlc/router/responsestore"
)

// Models is the front of one or more models, each its own Router: a
// request goes to the model its "model" field names (for embeddings, an
// embedding model's name too), or to the default model when it names
// none; GET /v1/models lists them all, embedding models included, as
// MLC's server does. With one model a request goes straight to it, its
// body unread: the dispatch costs nothing.
type Models struct {
	routers []*Router
	byName  map[string]*Router // chat models
	byEmbed map[string]*Router // embedding models, by their own names
	def     *Router
	// responses keeps the Responses API's stored responses, each record
	// at most responsesMax bytes; nil: none (StoreResponses).
	responses    responsestore.Store
	responsesMax int
	// mcp are the MCP servers the Responses API's hosted tools may call,
	// each answer at most mcpRounds rounds; nil: none (HostMCP, mcp.go).
	mcp       *mcpclient.Hosts
	mcpRounds int
}

// NewModels makes the front of routers, whose def-th serves requests
// that name no model.
func NewModels(routers []*Router, def int) *Models {
	m := &Models{routers: routers, byName: map[string]*Router{}, byEmbed: map[string]*Router{}, def: routers[def]}
	for _, r := range routers {
		m.byName[r.Model] = r
		if r.EmbeddingName != "" {
			m.byEmbed[r.EmbeddingName] = r
		}
	}
	return m
}

// ServeHTTP serves the OpenAI-compatible API, the paths Handles reports.
// The engines' own microserving endpoints are never reachable through the
// router.
func (m *Models) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch path := req.URL.Path; {
	case path == protocol.PathCompletions || path == protocol.PathChatCompletions || path == protocol.PathEmbeddings ||
		path == protocol.PathMessages || path == protocol.PathResponses:
		if !allowMethod(w, req, http.MethodPost) {
			return
		}
		a := m.apiOf(path)
		r := m.routeFor(w, req, a)
		if r == nil {
			return
		}
		if path == protocol.PathEmbeddings {
			r.serveEmbeddings(w, req)
		} else {
			r.serve(w, req, a)
		}
	case path == protocol.PathCountTokens:
		if !allowMethod(w, req, http.MethodPost) {
			return
		}
		r := m.routeFor(w, req, messagesAPI)
		if r == nil {
			return
		}
		r.dec.serveCountTokens(w, req)
	case path == protocol.PathModels:
		if allowMethod(w, req, http.MethodGet, http.MethodHead) {
			protocol.WriteJSON(w, http.StatusOK, protocol.NewModelList(m.def.live.since, ownedBy, allowed(req.Context(), append(m.names(), m.embeddingNames()...))...))
		}
	case strings.HasPrefix(path, protocol.PathModels+"/") && len(path) > len(protocol.PathModels)+1:
		if allowMethod(w, req, http.MethodGet, http.MethodHead) {
			m.serveModel(w, req, strings.TrimPrefix(path, protocol.PathModels+"/"))
		}
	case strings.HasPrefix(path, protocol.PathResponses+"/"):
		m.serveStored(w, req)
	case strings.HasPrefix(path, protocol.PathMicroserving):
		protocol.Errorf(http.StatusNotFound, protocol.ErrTypeNotFound, "%s is not served here: engines' microserving endpoints are not reachable through the router", path).
			WithCode(protocol.CodeUnknownURL).Write(w)
	default:
		protocol.Errorf(http.StatusNotFound, protocol.ErrTypeNotFound, "unknown URL %s %s: this server serves %s, %s, %s, %s, %s and %s",
			req.Method, path, protocol.PathCompletions, protocol.PathChatCompletions, protocol.PathEmbeddings, protocol.PathMessages,
			protocol.PathResponses, protocol.PathModels).
			WithCode(protocol.CodeUnknownURL).Write(w)
	}
}

// apiOf is the API served at path.
func (m *Models) apiOf(path string) api {
	switch path {
	case protocol.PathCompletions:
		return completionsAPI
	case protocol.PathChatCompletions:
		return chatAPI
	case protocol.PathMessages:
		return messagesAPI
	case protocol.PathResponses:
		return m.responsesAPI()
	}
	return embeddingsAPI
}

// route reads the body of a request to find the model it names, and
// returns that model's router with the body put back, and the name; nil
// when the request was answered (a body too large or too slow, an
// unknown model) as API a answers errors.
// The body is bounded by the largest max_body_size of the models (each
// then applies its own) and read within the default model's
// body_timeout.
func (m *Models) route(w http.ResponseWriter, req *http.Request, a api) (*Router, string) {
	limit := int64(0)
	for _, r := range m.routers {
		limit = max(limit, r.MaxBodySize)
	}
	lift := m.def.dec.readDeadline(w)
	b, apiErr := protocol.ReadBody(req.Body, limit)
	if apiErr != nil {
		if apiErr.Status != http.StatusRequestTimeout {
			lift()
		}
		m.def.refuse(w, req, a, apiErr)
		return nil, ""
	}
	lift()
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	name, _ := protocol.ModelOf(b)
	if name == "" {
		return m.def, "" // a model of another type: the model's decoder says so
	}
	r := m.byName[name]
	if req.URL.Path == protocol.PathEmbeddings && m.byEmbed[name] != nil {
		r = m.byEmbed[name]
	}
	if r == nil {
		m.def.refuse(w, req, a, m.modelNotFound(name))
	}
	return r, name
}

// names are the chat models served, in config order.
func (m *Models) names() []string {
	out := make([]string, len(m.routers))
	for i, r := range m.routers {
		out[i] = r.Model
	}
	return out
}

// serveModel answers GET /v1/models/{id}.
func (m *Models) serveModel(w http.ResponseWriter, req *http.Request, id string) {
	if m.byName[id] == nil && m.byEmbed[id] == nil || !permits(req.Context(), id) {
		modelNotFound(id, allowed(req.Context(), m.names()), allowed(req.Context(), m.embeddingNames())).Write(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.NewModelCard(m.def.live.since, ownedBy, id))
}

// modelNotFound is OpenAI's answer to a model it does not serve, naming
// the served ones.
func (m *Models) modelNotFound(id string) *protocol.Error {
	return modelNotFound(id, m.names(), m.embeddingNames())
}

// Ready reports whether every model has what it needs to serve, and
// names what is missing: per model, a ready engine; in disagg a ready
// decode engine (it prefills alone when no prefill engine is ready).
// It asks no engine: it reads the fleets' states.
func (m *Models) Ready() (ready bool, missing []string) {
	for _, r := range m.routers {
		if why := r.unready(); why != "" {
			missing = append(missing, r.Model+": "+why)
		}
	}
	return len(missing) == 0, missing
}

// ServeReadiness answers a readiness probe: 200 when Ready, else 503
// with the missing pieces, in JSON.
func (m *Models) ServeReadiness(w http.ResponseWriter, req *http.Request) {
	if !allowMethod(w, req, http.MethodGet, http.MethodHead) {
		return
	}
	ready, missing := m.Ready()
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Cache-Control", "no-store")
	protocol.WriteJSON(w, status, readiness{Ready: ready, Missing: missing, Models: m.names(), Cold: m.cold()})
}

// ServeShuttingDown answers a readiness probe while the server shuts
// down: 503, so that load balancers take the instance out.
func ServeShuttingDown(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	protocol.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "missing": []string{"the server is shutting down"}})
}

// shutdownRetryAfter is what a client refused during a shutdown is told:
// another replica takes it, or this one once restarted.
const shutdownRetryAfter = 2 * time.Second

// ShuttingDownError is the answer to an API request that arrives while
// the server shuts down: a clean 503 with Retry-After instead of a
// stream the engines' stop would cut.
func ShuttingDownError() *protocol.Error {
	e := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "the server is shutting down; try again").WithCode("shutting_down")
	e.RetryAfter = shutdownRetryAfter
	return e
}

// readiness is the body of a readiness answer.
type readiness struct {
	Ready   bool     `json:"ready"`
	Models  []string `json:"models"`
	Missing []string `json:"missing,omitempty"`
	// Cold are the models of scale min 0 with no engine running: ready,
	// their next request waits while an engine starts.
	Cold []string `json:"cold,omitempty"`
}

// embeddingNames are the embedding models served under names of their
// own, in config order.
func (m *Models) embeddingNames() []string {
	var out []string
	for _, r := range m.routers {
		out = append(out, r.dec.embeddingNames()...)
	}
	return out
}

// StoreResponses makes the Responses API keep responses in s, each record
// at most maxBytes (0: responsestore.DefaultMaxBytes); without a store
// (nil, the default) responses are answered with store false, and
// previous_response_id and /v1/responses/{id} are refused.
func (m *Models) StoreResponses(s responsestore.Store, maxBytes int) {
	if maxBytes <= 0 {
		maxBytes = responsestore.DefaultMaxBytes
	}
	m.responses, m.responsesMax = s, maxBytes
}
