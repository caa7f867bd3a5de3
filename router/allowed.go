package router

import (
	"context"
	"net/http"
	"slices"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

type allowedKey struct{}

// WithAllowedModels returns ctx allowing its request only the models
// named (chat or embedding models, by the names clients send): the
// models of the API key the request came with. A request for another
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
// request may not use as one not served, naming only those it may.
func (m *Models) routeAllowed(w http.ResponseWriter, req *http.Request, a api) *Router {
	r := m.route(w, req, a)
	if r == nil {
		return nil
	}
	ctx := req.Context()
	if permits(ctx, r.Model) || (req.URL.Path == protocol.PathEmbeddings && slices.ContainsFunc(r.dec.embeddingNames(), func(n string) bool { return permits(ctx, n) })) {
		return r
	}
	m.def.refuse(w, req, a, modelNotFound(r.Model, allowed(ctx, m.names()), allowed(ctx, m.embeddingNames())))
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
		return m.route(w, req, a)
	}
	return m.def
}
