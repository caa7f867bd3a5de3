package router

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Facts are what the router knows of who a request is for, from outside
// the request body: the adapter reads them (Caddy placeholders: an API key
// header, the authenticated user, the client IP) and puts them in the
// request's context with WithFacts. Policies see them in Request, the fair
// queue orders by them, budgets are kept by tenant.
type Facts struct {
	// Tenant is who the request is for; "" is the one default tenant.
	Tenant string
	// Band is the request's priority: a higher band is always served
	// first when requests wait for engines. Default 0.
	Band int
	// Targets are the request's latency targets; zero: none.
	Targets Targets
}

// Targets are a request's latency targets (its SLO): the time to its
// first token, from its arrival, and the time per output token after it.
// Zero is no target. The slo_aware policy routes for them, the gate may
// hold back or refuse a request that would miss them (SLOAdmission), and
// the router counts the requests that met them.
type Targets struct {
	TTFT time.Duration
	TPOT time.Duration
}

// Set says whether there is any target.
func (t Targets) Set() bool { return t.TTFT > 0 || t.TPOT > 0 }

// Or is t with each target it lacks taken from d: a request's own
// targets first, then its defaults, either target alone.
func (t Targets) Or(d Targets) Targets {
	if t.TTFT == 0 {
		t.TTFT = d.TTFT
	}
	if t.TPOT == 0 {
		t.TPOT = d.TPOT
	}
	return t
}

// maxTarget bounds a target a request sets itself.
const maxTarget = time.Hour

// ParseTargetMs reads a target a request sets, in milliseconds (the
// X-SLO-TTFT-Ms header's value, say): a positive number up to an hour;
// anything else is no target.
func ParseTargetMs(v string) time.Duration {
	if v == "" {
		return 0
	}
	ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(ms > 0) || ms > float64(maxTarget/time.Millisecond) {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

type factsKey struct{}

// WithFacts returns ctx carrying f.
func WithFacts(ctx context.Context, f Facts) context.Context {
	return context.WithValue(ctx, factsKey{}, f)
}

// factsOf returns the facts ctx carries, or the default tenant's.
func factsOf(ctx context.Context) Facts {
	f, _ := ctx.Value(factsKey{}).(Facts)
	return f
}
