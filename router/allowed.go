package router

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

type allowedKey struct{}

// WithAllowedModels returns ctx allowing its request only the models
// named (chat or embedding models, by their names in /v1/models): the
// models of the API key the request came with. A chat model's name does
// not allow its embedding model, nor the reverse. A request for another
// model is answered as one for a model not served (404
// model_not_found), and GET /v1/models lists only those. Without it
// every model is allowed.
func WithAllowedModels(ctx context.Context, models []string) context.Context {
	return context.WithValue(ctx, allowedKey{}, slices.Clip(models))
}

// allowedOf returns the models ctx allows, and whether it restricts
// them at all.
func allowedOf(ctx context.Context) ([]string, bool) {
	models, ok := ctx.Value(allowedKey{}).([]string)
	return models, ok
}

// allowed keeps of names those ctx allows.
func allowed(ctx context.Context, names []string) []string {
	models, restricted := allowedOf(ctx)
	if !restricted {
		return names
	}
	var out []string
	for _, n := range names {
		if slices.Contains(models, n) {
			out = append(out, n)
		}
	}
	return out
}

// permits says whether ctx allows the model id.
func permits(ctx context.Context, id string) bool {
	models, restricted := allowedOf(ctx)
	return !restricted || slices.Contains(models, id)
}

// routeAllowed is route for a request whose models are restricted: it
// reads the body even when one model is served, and refuses a model the
// request may not use as one not served, naming only those it may. The
// model a request uses is the one it reaches: on /v1/embeddings, the
// embedding model, whichever of its names or its chat model's the
// request gives.
func (m *Models) routeAllowed(w http.ResponseWriter, req *http.Request, a api) *Router {
	r, asked := m.route(w, req, a)
	if r == nil {
		return nil
	}
	reached := r.Model
	if req.URL.Path == protocol.PathEmbeddings && r.EmbeddingName != "" {
		reached = r.EmbeddingName
	}
	ctx := req.Context()
	if permits(ctx, reached) {
		return r
	}
	e := modelNotFound(cmp.Or(asked, reached), allowed(ctx, m.names()), allowed(ctx, m.embeddingNames()))
	if asked != reached && permits(ctx, r.Model) {
		e.Message = fmt.Sprintf("the model %q serves no embeddings to this API key", r.Model)
	}
	m.def.refuse(w, req, a, e)
	return nil
}

// routeFor is the router of a POST request of API a (nil when it was
// answered): the default model's when one model is served and the
// request's models are not restricted, without reading the body.
func (m *Models) routeFor(w http.ResponseWriter, req *http.Request, a api) *Router {
	if _, restricted := allowedOf(req.Context()); restricted {
		return m.routeAllowed(w, req, a)
	}
	if len(m.routers) > 1 {
		r, _ := m.route(w, req, a)
		return r
	}
	return m.def
}
