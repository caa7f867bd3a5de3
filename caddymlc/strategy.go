package caddymlc

import (
	"context"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// strategy runs one attempt of a request on the fleet: it sends the request
// to engines and returns the stream of the engine that generates, with the
// function that ends the attempt's hold on that engine. Engines in avoid
// failed an earlier attempt of the request and are used only when no other
// is ready. MLC calls this translate_request.
type strategy interface {
	open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, func(), error)
}

// noEngineError is returned when no engine of a needed role is ready.
type noEngineError struct{ role string }

func (e *noEngineError) Error() string { return "no " + e.role + " engine is ready" }

// apiError is the answer to a client when no engine can take its request.
func (e *noEngineError) apiError() *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
		"%s; try again shortly", e).WithCode("engine_unavailable")
}
