package caddymlc

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// releaseTimeout bounds giving a reservation back.
const releaseTimeout = time.Second

// releaseReservation gives back the KV pages that prep_recv reserved (or
// still waits to reserve) for req on the decode engine of l, when the
// request will not start generating there: the client left, remote_send
// failed, the attempt failed before start_generate took the reservation.
// Left alone, the pages would stay held until the engine's prep_recv
// timeout (a minute), invisible to the balancer.
//
// Engines that serve caddy-mlc's release extension (the built-in engine)
// drop the reservation at once. MLC's API has no such call: for an engine
// that answers 404, the router uses up the reservation with a
// start_generate that asks for one token and drops the stream at once,
// which makes the engine abort the request and free its pages. An engine
// that cannot be reached keeps the reservation until its own timeout (or
// its restart). It runs on a fresh context: the request's may be done.
func (r *Router) releaseReservation(l *lease, req *protocol.CompletionRequest, end int) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	user := userOf(req)
	if !l.noRelease.Load() {
		var ack protocol.ReleaseResponse
		err := r.client.post(ctx, l, protocol.PathRelease, protocol.ReleaseRequest{User: user}, &ack)
		var ee *engineError
		switch {
		case err == nil:
			r.metrics.releases.WithLabelValues("release").Inc()
			return
		case errors.As(err, &ee) && ee.apiErr != nil && (ee.apiErr.Status == http.StatusNotFound || ee.apiErr.Status == http.StatusMethodNotAllowed):
			l.noRelease.Store(true)
			r.logger.Info("engine has no release extension; giving reservations back through start_generate", addrField(l.upstream))
		default:
			r.metrics.releases.WithLabelValues("failed").Inc()
			r.logger.Debug("releasing a reservation", zap.String("user", user), addrField(l.upstream), zap.Error(err))
			return
		}
	}
	gen := protocol.StartGenerateRequest{CompletionRequest: *req.Clone(), Begin: end}
	gen.MaxTokens = new(1)
	gen.Stream, gen.StreamOptions = true, nil
	cl, err := r.client.start(ctx, l, protocol.PathStartGenerate, gen)
	if err != nil {
		r.metrics.releases.WithLabelValues("failed").Inc()
		r.logger.Debug("using up a reservation", zap.String("user", user), addrField(l.upstream), zap.Error(err))
		return
	}
	cl.end() // drop the stream: the engine aborts the request
	r.metrics.releases.WithLabelValues("start_generate").Inc()
}

// userOf returns the request's user: the id that ties its microserving
// calls together.
func userOf(req *protocol.CompletionRequest) string {
	if req.User == nil {
		return ""
	}
	return *req.User
}
