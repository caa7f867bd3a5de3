package router

import (
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Answers of several rounds of the model: the Responses API's hosted
// tools (mcp.go) run the calls the model made between one round and the
// next, each round a request to the engines of its own, admitted (the
// tenant's budget, the fair queue), run and recorded as any other, its
// text going on in the one answer.

// nextRounds runs the rounds of an answer after its first (whose
// outcome sink is rec), each asked of a.next, until it has none or a
// round fails.
func (r *Router) nextRounds(sw *stallWriter, hreq *http.Request, a api, rec *outcomeSink) {
	for {
		begin := time.Now()
		req, prompt, apiErr := a.next(hreq.Context(), &r.dec)
		if apiErr == nil && req != nil {
			apiErr = r.checkRequest(prompt, req)
		}
		switch {
		case apiErr != nil:
			r.failAnswer(hreq, a, rec, apiErr)
			return
		case req == nil:
			return
		}
		var ok bool
		if rec, ok = r.round(sw, hreq, a, req, prompt, begin, true); !ok {
			return
		}
	}
}

// failAnswer ends an answer whose stream may have begun with apiErr, as
// its sink ends it (the status, if nothing was written yet; else the
// stream's last event), counted and published as its outcome.
func (r *Router) failAnswer(hreq *http.Request, a api, rec *outcomeSink, apiErr *protocol.Error) {
	outcome := outcomeOf(apiErr)
	r.metrics.requests.WithLabelValues(r.Model, r.Mode, a.endpoint, outcome).Inc()
	r.vars(hreq.Context(), VarOutcome, outcome)
	rec.fail(apiErr)
}
