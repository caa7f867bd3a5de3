package builtin

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// embeddings answers POST /v1/embeddings as MLC's server does: with the
// engine's one embedding model whatever the request's model says (MLC
// serves its only embedding model under any name), the answer naming the
// requested model, else the embedding model. Without an embedding model
// it is MLC's 400. Inputs longer than the model embeds, and dimensions
// beyond its size, are refused where MLC would cut them short or ignore
// them (protocol.EmbeddingInput.CheckTokens, CheckDimensions).
func (s *server) embeddings(w http.ResponseWriter, r *http.Request) {
	req, perr := protocol.DecodeEmbeddingRequest(r.Body, 0)
	if perr != nil {
		perr.Write(w)
		return
	}
	m := s.e.emb
	if m == nil {
		notServed(req.Model).Write(w)
		return
	}
	if perr := req.CheckDimensions(EmbeddingDim); perr != nil {
		perr.Write(w)
		return
	}
	vectors, tokens, perr := m.embedAll(r.Context(), req.Input)
	if perr != nil {
		perr.Write(w)
		return
	}
	model := req.Model
	if model == "" {
		model = m.id
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.NewEmbeddingResponse(req, model, vectors, tokens))
}

// notServed is MLC's answer to an embeddings request on an engine without
// an embedding model, in its words.
func notServed(model string) *protocol.Error {
	name := model
	if name == "" {
		name = "None" // Python's None: MLC formats the absent model so
	}
	return protocol.InvalidRequest("model", "The requested model %q is not served as an embedding model. (This engine was started without --embedding-model.)", name).
		WithCode(protocol.CodeModelNotFound)
}
