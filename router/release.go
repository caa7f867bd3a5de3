package router

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Giving a reservation back: each try is bounded by releaseTimeout; an
// engine that cannot be reached (frozen, overloaded) is asked again with
// backoff for up to releaseRetryFor, the built-in engine's own prep_recv
// timeout, after which the engine has freed the pages itself.
const (
	releaseTimeout  = time.Second
	releaseRetryFor = time.Minute
)

// releaseReservation gives back, in the background, the KV pages that
// prep_recv reserved (or still waits to reserve) for req on the decode
// engine of l, when the request will not start generating there: left
// alone, they would stay held until the engine's prep_recv timeout,
// invisible to the balancer. The attempt that gave up goes on at once:
// its next attempt has its own user, which the release never touches.
func (d *disagg) releaseReservation(l *lease, req *protocol.CompletionRequest, end int) {
	rel := &release{r: d.r, p: l.proc, req: req, end: end}
	goroutine.Go(d.r.logger, "reservation release", rel.run, nil)
}

// releaseUnknown gives back a reservation that may or may not exist, or
// may already be in use: after a prep_recv or a start_generate that
// failed. Only the release extension is safe then; MLC's engine, asked
// for a start_generate of a request it never prepared, or of one that
// runs, fails a check (and may stop its engine thread). On such an
// engine what the failed call left is held until its prep_recv timeout
// or its generation ends.
func (d *disagg) releaseUnknown(l *lease, req *protocol.CompletionRequest) {
	if l.noRelease.Load() {
		return
	}
	rel := &release{r: d.r, p: l.proc, req: req, extensionOnly: true}
	goroutine.Go(d.r.logger, "reservation release", rel.run, nil)
}

// release is one reservation to give back, on the engine's process p
// that holds it. Its calls are its own, made on no lease: the lease that
// asked for the reservation may be released by then.
//
// Engines that serve caddy-mlc's release extension (the built-in engine)
// drop the reservation at once. MLC's API has no such call: for an engine
// that answers 404, the router uses up the reservation with a whole (not
// streamed) start_generate that asks for one token. MLC's engine keeps
// the prep_recv's max_tokens instead, and does not abort a stream whose
// client left (its server does not tell it), but its entrypoint for a
// whole answer checks for a client gone at every token and aborts: so the
// router drops the call after releaseTimeout, and the engine frees the
// pages at its next token. An engine that cannot be reached is asked
// again until it answers, restarts (its KV went with its process) or its
// own timeout has freed the pages.
type release struct {
	r   *Router
	p   proc
	req *protocol.CompletionRequest
	end int
	// extensionOnly: through the release extension, or not at all.
	extensionOnly bool
}

func (rel *release) run() {
	begin := time.Now()
	b := backoff.Backoff{Min: releaseTimeout, Max: 16 * time.Second}
	for {
		how, reached := rel.once()
		if reached {
			rel.r.metrics.releases.WithLabelValues(how).Inc()
			return
		}
		if time.Since(begin) > releaseRetryFor {
			rel.r.metrics.releases.WithLabelValues("failed").Inc()
			rel.r.logger.Warn("could not give a reservation back; the engine's own timeout frees it",
				zap.String("user", userOf(rel.req)), addrField(rel.p.Upstream))
			return
		}
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-rel.p.pool.procs.Done():
			t.Stop()
			return // the engines stopped, and their KV with them
		}
		if _, pid := rel.p.status(); pid != rel.p.pid {
			return // the engine restarted: its KV went with the old process
		}
	}
}

// once tries to give the reservation back. reached reports that the
// engine answered (whatever it said); how says how it was done.
func (rel *release) once() (how string, reached bool) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	user := userOf(rel.req)
	if !rel.p.noRelease.Load() {
		var ack protocol.ReleaseResponse
		err := rel.r.client.post(ctx, &rel.p, protocol.PathRelease, protocol.ReleaseRequest{User: user}, &ack)
		rel.p.judge(err)
		var ee *engineError
		switch {
		case err == nil:
			return "release", true
		case errors.As(err, &ee) && ee.apiErr != nil && (ee.apiErr.Status == http.StatusNotFound || ee.apiErr.Status == http.StatusMethodNotAllowed):
			rel.p.noRelease.Store(true)
			rel.r.logger.Info("engine has no release extension; reservations are given back through start_generate", addrField(rel.p.Upstream))
			if rel.extensionOnly {
				return "failed", true
			}
		case errors.As(err, &ee) && ee.apiErr != nil:
			return "failed", true // it answered, and refused: nothing more to do
		default:
			rel.r.logger.Debug("giving a reservation back", zap.String("user", user), addrField(rel.p.Upstream), zap.Error(err))
			return "", false
		}
	}
	gen := protocol.StartGenerateRequest{CompletionRequest: *rel.req.Clone(), Begin: rel.end}
	gen.MaxTokens = new(1)
	gen.Stream, gen.StreamOptions = false, nil
	var answer protocol.CompletionResponse
	err := rel.r.client.post(ctx, &rel.p, protocol.PathStartGenerate, gen, &answer)
	rel.p.judge(err)
	var ee *engineError
	switch {
	case err == nil:
		return "start_generate", true
	case errors.As(err, &ee) && ee.apiErr != nil:
		return "failed", true
	case ctx.Err() != nil && engine.Probe(context.Background(), rel.r.client.http, rel.p.url, releaseTimeout) == nil:
		// The engine is alive and still generating: MLC's start_generate
		// keeps the max_tokens of the prep_recv. The deadline dropped the
		// call, and MLC's entrypoint for a whole answer checks for a
		// client gone at every token and then aborts the request.
		return "start_generate", true
	}
	rel.r.logger.Debug("using up a reservation", zap.String("user", user), addrField(rel.p.Upstream), zap.Error(err))
	return "", false
}

// userOf returns the request's user: the id that ties its microserving
// calls together.
func userOf(req *protocol.CompletionRequest) string {
	if req.User == nil {
		return ""
	}
	return *req.User
}
