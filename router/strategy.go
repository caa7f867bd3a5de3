package router

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// strategy runs one attempt of a request on a router's engines: it
// chooses them, makes the calls the mode needs and has read read the
// generation of the engine that makes the text. It owns the leases it
// acquires: each is released, deferred, where it was acquired, once the
// engine's part is over. Engines in avoid failed an earlier attempt of
// the request and are chosen only when no other is ready. MLC calls this
// translate_request.
type strategy interface {
	run(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool, read reader) error
}

// Interface guards.
var (
	_ strategy = (*disagg)(nil)
	_ strategy = (*wholeRequest)(nil)
)

// wholeRequest sends each whole request to one engine's /v1/completions,
// the least loaded (MLC's "round-robin" mode).
type wholeRequest struct{ r *Router }

func (s *wholeRequest) run(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool, read reader) (err error) {
	q := s.r.newRequest(ctx, req)
	l, err := s.r.acquire(ctx, "", pickOptions{avoid: avoid, req: q, needPages: pagesFor(len(q.Prompt))})
	if err != nil {
		return err
	}
	defer func() { l.release(err) }()
	l.routed()
	g, err := s.r.generate(ctx, l, protocol.PathCompletions, req, req.Stream)
	if err != nil {
		return err
	}
	return g.consume(read)
}
