package caddymlc

import (
	"context"
	"errors"
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

// errNoEngine is returned when no engine of a needed role is ready.
var errNoEngine = errors.New("no engine is ready")

// noEngineError is the answer to a client when no engine can take its
// request.
func noEngineError(role string) *protocol.Error {
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
		"no %s engine is ready; try again shortly", role).WithCode("engine_unavailable")
}
