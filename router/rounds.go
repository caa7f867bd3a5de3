package router

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Answers of several rounds of the model: the Responses API's hosted
// tools (mcp.go) run the calls the model made between one round and the
// next, each round a request to the engines of its own (serve's loop),
// admitted (the tenant's budget, the fair queue), run and recorded as
// any other, its text going on in the one answer.

// nextRound is the checked request of an answer's next round, asked of
// a.next; nil when the answer is done.
func (r *Router) nextRound(hreq *http.Request, a api) (*protocol.CompletionRequest, []int, *protocol.Error) {
	req, prompt, apiErr := a.next(hreq.Context(), &r.dec)
	if apiErr == nil && req != nil {
		apiErr = r.checkRequest(prompt, req)
	}
	return req, prompt, apiErr
}

// refuseRound answers a round the gate refused: as refuseWaited does the
// first; a later one ends the answer, whose stream may have begun.
func (r *Router) refuseRound(w http.ResponseWriter, hreq *http.Request, a api, rec *outcomeSink, later bool, apiErr *protocol.Error) {
	if later {
		r.failAnswer(hreq, a, rec, apiErr)
		return
	}
	r.refuseWaited(w, hreq, a, rec, apiErr)
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
