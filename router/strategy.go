package router

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// strategy runs one attempt of a request on a router's engines: it makes
// the calls the mode needs and returns the stream of the engine that
// generates, which holds that engine until it is closed. Engines in avoid
// failed an earlier attempt of the request and are chosen only when no
// other is ready. MLC calls this translate_request.
type strategy interface {
	open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, error)
}

// Interface guards.
var (
	_ strategy = (*disagg)(nil)
	_ strategy = (*wholeRequest)(nil)
)

// wholeRequest sends each whole request to one engine's /v1/completions,
// the least loaded (MLC's "round-robin" mode).
type wholeRequest struct{ r *Router }

func (s *wholeRequest) open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, error) {
	q := s.r.newRequest(ctx, req)
	l, err := s.r.acquire(ctx, "", pickOptions{avoid: avoid, req: q, needPages: pagesFor(len(q.Prompt))})
	if err != nil {
		return nil, err
	}
	l.routed()
	return s.r.client.generate(ctx, l, protocol.PathCompletions, req, req.Stream)
}
