package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// The gate is where a request waits for the engines when they are
// saturated, so that the order of service is the router's and fair across
// tenants, not each engine's FIFO: the router sends the engines no more
// requests than they can run at once (their batch: max_num_sequence, or
// max_inflight), and holds the rest in a fair queue (router/fair): by
// priority band, then by tokens across tenants. Before it, a tenant's
// budget (router/budget) reserves the request's tokens; the request pays
// what it really cost when it ends.

// gate is an admitted request's hold on the engines' capacity and on its
// tenant's budget, given back by done.
type gate struct {
	ticket *fair.Ticket
	res    *budget.Reservation
	waited time.Duration
}

// ungated is the gate of every request of a router with no gate and no
// budgets.
var ungated gate

// admit reserves the request's tokens in its tenant's budget and waits for
// its turn at the engines. tokens is what the request may cost: its
// prompt and all it may generate. It sets the budget's headers on w.
func (r *Router) admit(ctx context.Context, w http.ResponseWriter, f Facts, tokens int64) (g *gate, err error) {
	if r.budgets == nil && r.batch <= 0 {
		return &ungated, nil // nothing to wait for or to pay: no cost on the request's path
	}
	ctx, span := startSpan(ctx, "mlc.admission", attribute.String("mlc.model", r.Model), attribute.String("mlc.tenant", f.Tenant),
		attribute.Int("mlc.band", f.Band), attribute.Int64("mlc.tokens", tokens))
	defer func() { endSpan(span, err) }()
	g = &gate{}
	if r.budgets != nil {
		res, dec, err := r.budgets.Reserve(ctx, f.Tenant, tokens)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			// A budget store that fails does not stop the service.
			r.logger.Warn("budget store failed: the request is served unmetered", zap.String("tenant", f.Tenant), zap.Error(err))
		case !dec.Allowed:
			dec.SetHeaders(w.Header())
			r.metrics.rateLimited.WithLabelValues(r.metrics.tenants.Label(f.Tenant, 1), dec.Exceeded).Inc()
			return nil, dec.Error()
		default:
			dec.SetHeaders(w.Header())
			g.res = res
		}
	}
	r.refreshLimits()
	t, err := r.queue.Enqueue(ctx, fair.Item{Tenant: f.Tenant, Band: f.Band, Cost: tokens})
	if err != nil {
		if g.res != nil {
			_ = g.res.Cancel(context.WithoutCancel(ctx))
		}
		return nil, gateError(ctx, err)
	}
	g.ticket, g.waited = t, t.Waited()
	r.metrics.admissionWait.WithLabelValues(r.Model, r.metrics.tenants.Label(f.Tenant, tokens)).Observe(g.waited.Seconds())
	r.metrics.waiting.WithLabelValues(r.Model).Set(float64(r.queue.Stats().Waiting))
	return g, nil
}

// done gives back the request's capacity and settles its budget with
// what it really cost (a client that left pays for what it was sent).
func (r *Router) done(ctx context.Context, g *gate, used int64) {
	if g.ticket == nil {
		return
	}
	r.queue.Finish(g.ticket, used)
	if g.res != nil {
		if err := g.res.Settle(context.WithoutCancel(ctx), used); err != nil {
			r.logger.Warn("settling a budget", zap.Error(err))
		}
	}
	r.refreshLimits()
	r.metrics.waiting.WithLabelValues(r.Model).Set(float64(r.queue.Stats().Waiting))
}

// gateError is the answer to a request the gate did not admit.
func gateError(ctx context.Context, err error) error {
	var timeout *fair.TimeoutError
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &timeout):
		return &noEngineError{role: "free", waited: timeout.Waited, cause: fmt.Errorf("every engine was busy for %v (band %d)", timeout.Waited.Round(time.Millisecond), timeout.Band)}
	case errors.Is(err, fair.ErrFull):
		return &noEngineError{role: "free", full: true}
	}
	return err
}

// generatingRole is the role of the engines that generate, whose batch
// the gate fills: decode engines in disagg, any in whole mode.
func (r *Router) generatingRole() string {
	if r.Mode == ModeDisagg {
		return engine.RoleDecode
	}
	return ""
}

// refreshLimits sets the gate's capacity from the engines that can serve
// now: each ready generating engine runs up to its batch. With no batch
// known (MLC's server mode without max_inflight), or no engine ready (the
// engine queue then waits for one), the gate holds nothing back.
func (r *Router) refreshLimits() {
	if r.batch <= 0 {
		return
	}
	ready := 0
	for _, u := range r.candidates(r.generatingRole()) {
		if ok, _ := u.status(); ok {
			ready++
		}
	}
	if ready == 0 {
		r.queue.SetLimits(fair.Unlimited)
		return
	}
	r.queue.SetLimits(fair.Limits{Requests: ready * r.batch, Tokens: -1})
}

// followEngines refreshes the gate's capacity as engines come and go,
// until the router closes.
func (r *Router) followEngines(closed <-chan struct{}) {
	for {
		changed := engineChanges.wait()
		r.refreshLimits()
		select {
		case <-changed:
		case <-closed:
			return
		}
	}
}
