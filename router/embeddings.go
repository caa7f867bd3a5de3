package router

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The embeddings API (/v1/embeddings): a whole request to the least
// loaded ready engine of the model's fleet (any role: every engine loads
// the embedding model), retried on another engine when one fails, as a
// completion is. The engine's vectors go back to the client as they came
// (the float or base64 form it asked for), under the model's name.

// embeddingBounds is what the router knows of the embedding model, to
// refuse what it cannot embed before an engine is asked: its dimension
// and the tokens of one input (0: unknown, the engine judges).
type embeddingBounds struct{ dim, maxTokens int }

// loadEmbeddingBounds reads the bounds of the embedding model, as the
// engines' kind knows them (the built-in engine's); unknown otherwise.
func loadEmbeddingBounds(kind engine.Kind, model, lib string) embeddingBounds {
	if model == "" {
		return embeddingBounds{}
	}
	dim, maxTokens := kind.Driver().EmbeddingBounds(model, lib)
	return embeddingBounds{dim: dim, maxTokens: maxTokens}
}

// serveEmbeddings answers POST /v1/embeddings.
func (r *Router) serveEmbeddings(w http.ResponseWriter, hreq *http.Request) {
	lift := r.dec.readDeadline(w)
	b, release, apiErr := r.dec.readBody(hreq)
	if apiErr == nil || apiErr.Status != http.StatusRequestTimeout {
		lift()
	}
	if apiErr != nil {
		r.refuse(w, hreq, embeddingsAPI, apiErr)
		return
	}
	req, asked, apiErr := r.dec.prepareEmbeddings(b)
	release()
	if apiErr != nil {
		r.refuse(w, hreq, embeddingsAPI, apiErr)
		return
	}
	id := protocol.NewID("embd-")
	log := r.logger.WithLazy(zap.String("request_id", id))
	begin := time.Now()
	var resp protocol.EmbeddingResponse
	engineAddr, attempts, err := r.embed(hreq.Context(), id, req, &resp)
	outcome := "ok"
	if err != nil {
		apiErr = answerOf(err)
		outcome = outcomeOf(apiErr)
	}
	r.metrics.requests.WithLabelValues(r.Model, r.Mode, embeddingsAPI.endpoint, outcome).Inc()
	r.vars(hreq.Context(), VarRequestID, id)
	r.vars(hreq.Context(), VarOutcome, outcome)
	r.vars(hreq.Context(), VarEngine, engineAddr)
	r.vars(hreq.Context(), VarAttempts, attempts)
	r.vars(hreq.Context(), VarPromptTokens, resp.Usage.PromptTokens)
	log.Debug("embeddings", zap.String("outcome", outcome), zap.String("engine", engineAddr), zap.Int("inputs", req.Input.Len()),
		zap.Int("prompt_tokens", resp.Usage.PromptTokens), zap.Int("attempts", attempts), zap.Duration("duration", time.Since(begin)))
	if apiErr != nil {
		apiErr.Write(w)
		return
	}
	resp.Model = cmp.Or(asked, r.Model)
	protocol.WriteJSON(w, http.StatusOK, &resp)
}

// embed runs the request's attempts: each on the least loaded ready
// engine that has not failed it, until one answers or the attempts run
// out. It returns the engine that answered and the attempts made.
func (r *Router) embed(ctx context.Context, id string, req *protocol.EmbeddingRequest, out *protocol.EmbeddingResponse) (string, int, error) {
	avoid := map[string]bool{}
	var last error
	for attempt := 1; attempt <= r.MaxAttempts; attempt++ {
		user := id + "-" + strconv.Itoa(attempt)
		req.User = &user
		addr, err := r.serving().embedOn(ctx, pickOptions{avoid: avoid, req: &Request{ID: user, Model: r.Model}}, req, out)
		switch {
		case errors.Is(err, errDraining):
			attempt-- // the successor's engines take it; no attempt spent
			continue
		case err == nil:
			return addr, attempt, nil
		case addr == "": // no engine
			return "", attempt - 1, err
		}
		last = err
		if retryCause(err) == "" || ctx.Err() != nil {
			return addr, attempt, err
		}
		r.metrics.retry(retryCause(err))
		if _, ee := verdictOf(err); ee != nil {
			avoid[ee.proc] = true // the engine process (see avoidKey)
		}
	}
	return "", r.MaxAttempts, last
}

// embedOn runs one attempt on an engine it acquires, and releases it.
// addr is the engine's, "" when none was acquired.
func (r *Router) embedOn(ctx context.Context, o pickOptions, req *protocol.EmbeddingRequest, out *protocol.EmbeddingResponse) (addr string, err error) {
	l, err := r.acquire(ctx, "", o)
	if err != nil {
		return "", err
	}
	defer func() { l.release(err) }()
	l.routed()
	err = r.client.post(ctx, &l.proc, protocol.PathEmbeddings, req, out)
	l.judge(err)
	if err == nil {
		l.finish(nil)
	}
	return l.addr, err
}
