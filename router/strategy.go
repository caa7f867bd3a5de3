package router

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// strategy starts one attempt of a request on a router's engines, as the
// mode does it: it chooses them, makes the calls that come before the
// generation, and returns the generating engine's stream as an attempt
// that owns that engine's lease. It releases what it acquired when it
// returns an error (or panics). Engines in avoid failed an earlier
// attempt of the request and are chosen only when no other is ready. MLC
// calls this translate_request.
type strategy interface {
	start(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*attempt, error)
	// generatingRole is the role of the engines that generate: the gate
	// fills their batch, and the router is ready when one of them is.
	generatingRole() string
	// roles returns, for every role a call of the mode can need, the
	// endpoints that serve it ("" is any engine).
	roles(eps []engine.Endpoint) map[string][]int
}

// newStrategy is the strategy of r's mode.
func newStrategy(r *Router) strategy {
	if r.Mode == ModeWhole {
		return &wholeRequest{r: r}
	}
	return &disagg{r: r, balance: r.PDBalanceFactor, maxPrefillQueue: r.MaxPrefillQueue}
}

// RoleIndexes returns, for every role a call of mode can need, the
// endpoints that serve it: "" (any engine), and in disagg mode prefill
// and decode.
func RoleIndexes(mode string, eps []engine.Endpoint) map[string][]int {
	return newStrategy(&Router{Config: Config{Mode: mode}}).roles(eps)
}

// allEndpoints are the indexes of n endpoints.
func allEndpoints(n int) map[string][]int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return map[string][]int{"": all}
}

// Interface guards.
var (
	_ strategy = (*disagg)(nil)
	_ strategy = (*wholeRequest)(nil)
)

// wholeRequest sends each whole request to one engine's /v1/completions,
// chosen by the policy (MLC's "round-robin" mode).
type wholeRequest struct{ r *Router }

func (s *wholeRequest) generatingRole() string { return "" }

func (s *wholeRequest) roles(eps []engine.Endpoint) map[string][]int { return allEndpoints(len(eps)) }

func (s *wholeRequest) start(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (a *attempt, err error) {
	q := s.r.newRequest(ctx, req)
	l, err := s.r.acquire(ctx, "", pickOptions{avoid: avoid, req: q, needPages: pagesFor(len(q.Prompt))})
	if err != nil {
		return nil, err
	}
	defer func() {
		if a == nil {
			l.release(err)
		}
	}()
	l.routed()
	ctx = s.r.planPrefill(l.bind(ctx), l.Upstream, s.r.readsLatency, l.uncached(len(q.Prompt)))
	return startAttempt(ctx, s.r.client, l, protocol.PathCompletions, req, req.Stream)
}
