package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

// gate admits a router's requests: its tenants' budgets, and the fair
// queue in front of its generating engines.
type gate struct {
	live *Live
	// ungated is the hold of every request when there is no queue and
	// no budgets.
	ungated admitted
	model   string
	queue   *fair.Queue
	batch   int             // each generating engine's; 0: unknown, no queue
	budgets *budget.Limiter // nil: none
	ready   func() int      // the generating engines ready now
	slo     SLOAdmission    // admission against latency targets (sloadmit.go)
	predict sloPredictor    // the engines' predicted time to first token
	logger  *zap.Logger
	metrics *routerMetrics
}

// newGate makes the gate of a router of cfg: o's queue (one that
// outlives the router keeps its waiters across a reload) or one of its
// own, o's budgets, and each generating engine's batch where the router
// can know it: only the router's own engines run its command line; an
// external or discovered one's batch is its operator's (max_inflight).
func newGate(cfg *Config, o Options, ready func() int, log *zap.Logger, metrics *routerMetrics) (gate, error) {
	g := gate{live: o.Live, model: cfg.Model, queue: o.Queue, budgets: o.Budgets, ready: ready, slo: cfg.SLOAdmission, logger: log, metrics: metrics}
	if g.queue == nil {
		var err error
		if g.queue, err = fair.New(fair.Config{MaxWaiting: cfg.QueueSize, Timeout: cfg.QueueTimeout}); err != nil {
			return g, err
		}
	}
	switch {
	case cfg.MaxInflight > 0:
		g.batch = cfg.MaxInflight
	case cfg.MaxInflight == 0 && o.Discovered == nil && !slices.ContainsFunc(cfg.Endpoints, func(ep engine.Endpoint) bool { return ep.External }):
		g.batch = cfg.EngineKind.Driver().Batch(cfg.Path, cfg.EngineArgs)
	}
	return g, nil
}

// admitted is a request's hold on the engines' capacity and on its
// tenant's budget, given back by done.
type admitted struct {
	ticket *fair.Ticket
	res    *budget.Reservation
	waited time.Duration
}

// admit holds back a request predicted to miss its latency target (if
// the gate admits against targets), reserves the request's tokens in its
// tenant's budget and waits for its turn at the engines. prompt is its
// prompt's tokens, tokens what the request may cost: its prompt and all
// it may generate; begin is its arrival. It sets the budget's headers on
// w, then calls waiting while it waits in the queue (a stream's
// keep-alives), which writes nothing else.
func (g *gate) admit(ctx context.Context, w http.ResponseWriter, f Facts, prompt int, tokens int64, begin time.Time, waiting func() (stop func())) (h *admitted, err error) {
	if err := g.slo.hold(ctx, g.predict, f, prompt, begin); err != nil {
		g.metrics.sloRefused.WithLabelValues(g.model, g.metrics.tenants.Label(f.Tenant, 1), bandLabel(f.Band)).Inc()
		return nil, err
	}
	if g.budgets == nil && g.batch <= 0 {
		return &g.ungated, nil // nothing to wait for or to pay: no cost on the request's path
	}
	ctx, span := startSpan(ctx, "mlc.admission", attribute.String("mlc.model", g.model), attribute.String("mlc.tenant", f.Tenant),
		attribute.Int("mlc.band", f.Band), attribute.Int64("mlc.tokens", tokens))
	defer func() { endSpan(span, err) }()
	h = &admitted{}
	if g.budgets != nil {
		res, dec, err := g.budgets.Reserve(ctx, f.Tenant, tokens)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			// A budget store that fails does not stop the service.
			g.logger.Warn("budget store failed: the request is served unmetered", zap.String("tenant", f.Tenant), zap.Error(err))
		case !dec.Allowed:
			dec.SetHeaders(w.Header())
			g.metrics.rateLimited.WithLabelValues(g.metrics.tenants.Label(f.Tenant, 1), dec.Exceeded).Inc()
			return nil, dec.Error()
		default:
			dec.SetHeaders(w.Header())
			h.res = res
		}
	}
	g.refreshLimits()
	t, err := g.wait(ctx, fair.Item{Tenant: f.Tenant, Band: f.Band, Cost: tokens}, waiting)
	if err != nil {
		if h.res != nil {
			_ = h.res.Cancel(context.WithoutCancel(ctx))
		}
		return nil, gateError(ctx, err)
	}
	h.ticket, h.waited = t, t.Waited()
	g.metrics.admissionWait.WithLabelValues(g.model, g.metrics.tenants.Label(f.Tenant, tokens)).Observe(h.waited.Seconds())
	g.metrics.waiting.WithLabelValues(g.model).Set(float64(g.queue.Stats().Waiting))
	return h, nil
}

// wait submits it to the queue and waits for its grant, calling waiting
// for the time it is not granted at once.
func (g *gate) wait(ctx context.Context, it fair.Item, waiting func() (stop func())) (*fair.Ticket, error) {
	t, err := g.queue.Submit(it)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.Ready():
	default:
		stop := waiting()
		defer stop()
	}
	if err := t.Wait(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// done gives back the request's capacity (used: its tokens) and settles
// its budget with what it really cost, cost (a client that left pays for
// what it was sent; cached prompt tokens at cached_token_weight).
func (g *gate) done(ctx context.Context, h *admitted, used, cost int64) {
	if h.ticket == nil {
		return
	}
	g.queue.Finish(h.ticket, used)
	if h.res != nil {
		if err := h.res.Settle(context.WithoutCancel(ctx), cost); err != nil {
			g.logger.Warn("settling a budget", zap.Error(err))
		}
	}
	g.refreshLimits()
	g.metrics.waiting.WithLabelValues(g.model).Set(float64(g.queue.Stats().Waiting))
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

// refreshLimits sets the gate's capacity from the engines that can serve
// now: each ready generating engine runs up to its batch, less what other
// replicas run on them (peerload.go). With no batch
// known (MLC's server mode without max_inflight), or no engine ready (the
// engine queue then waits for one), the gate holds nothing back.
func (g *gate) refreshLimits() {
	if g.batch <= 0 {
		return
	}
	ready := g.ready()
	if ready == 0 {
		g.queue.SetLimits(fair.Unlimited)
		return
	}
	peers := g.live.peersOf(g.model)
	l := fair.Limits{Requests: capacity(ready, g.batch, peers), Tokens: -1}
	if peers.inFlight > 0 {
		l.Borrow = 1 // see fair.Limits.Borrow
	}
	g.queue.SetLimits(l)
}

// followEngines refreshes the gate's capacity as engines come and go,
// until the router closes.
func (g *gate) followEngines(closed <-chan struct{}) {
	for {
		changed := g.live.changes.wait()
		g.refreshLimits()
		select {
		case <-changed:
		case <-closed:
			return
		}
	}
}
