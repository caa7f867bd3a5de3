package mlccheck

import (
	"context"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// embeddings checks, for a model with an embedding model, that engine i
// embeds texts by the embedding model's name, as the router asks (the
// name the engines load it by; clients may know it by another), one
// vector per input, each of the same length as every other engine's.
func (ck *checker) embeddings(ctx context.Context, i int) {
	cfg := ck.r.cfg
	if cfg.EmbeddingModel == "" {
		return // nothing to check: no row
	}
	input := []string{ck.p.nonce + " the cat sat on the mat", ck.p.nonce + " by the river"}
	var resp protocol.EmbeddingResponse
	req := map[string]any{"model": cfg.EmbeddingModel, "input": input, "encoding_format": protocol.EncodingFloat}
	if err := ck.c.postJSON(ctx, ck.r.url(i)+protocol.PathEmbeddings, req, &resp); err != nil {
		ck.fail(CheckEmbeddings, []int{i}, "%s: %v", cfg.EmbeddingModel, err)
		return
	}
	dim := 0
	for j, d := range resp.Data {
		if n := len(d.Embedding.Floats); n == 0 || dim != 0 && n != dim || d.Index != j {
			ck.fail(CheckEmbeddings, []int{i}, "%s: vector %d (index %d) has %d values", cfg.EmbeddingModel, j, d.Index, n)
			return
		}
		dim = len(d.Embedding.Floats)
	}
	switch {
	case len(resp.Data) != len(input):
		ck.fail(CheckEmbeddings, []int{i}, "%s: %d vectors for %d inputs", cfg.EmbeddingModel, len(resp.Data), len(input))
	case ck.embedDim != 0 && dim != ck.embedDim:
		ck.fail(CheckEmbeddings, []int{i}, "%s: vectors of %d values, another engine's have %d", cfg.EmbeddingModel, dim, ck.embedDim)
	default:
		ck.embedDim = dim
		ck.pass(CheckEmbeddings, []int{i}, "%s (clients' name %q): %d vectors of %d values", cfg.EmbeddingModel, cfg.EmbeddingModelName, len(resp.Data), dim)
	}
}
