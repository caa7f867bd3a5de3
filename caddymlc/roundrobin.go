package caddymlc

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// roundRobin sends each whole request to the least-loaded engine's
// /v1/completions (MLC's "round-robin" mode).
type roundRobin struct {
	bal    *balancer
	client *engineClient
	all    []int
}

func (r *roundRobin) open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, func(), error) {
	be, release := r.bal.acquire(r.all, avoid)
	if be == nil {
		return nil, nil, &noEngineError{"available"}
	}
	s, err := r.client.stream(ctx, be, protocol.PathCompletions, req)
	if err != nil {
		release()
		return nil, nil, err
	}
	return s, release, nil
}
