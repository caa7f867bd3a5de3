package builtin

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"path/filepath"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TinyEmbedModel is the name of the built-in embedding model, which
// tokenizes with the tiny model's tokenizer.
const TinyEmbedModel = "tiny-embed"

// EmbeddingDim is the size of the built-in embedding model's vectors.
const EmbeddingDim = 64

// defaultEmbeddingTokens bounds one input, EOS included, when the model
// says nothing: a BERT-sized window.
const defaultEmbeddingTokens = 512

// embedder is the built-in embedding model: every token id stands for a
// fixed pseudo-random vector (splitmix64 of the model's seed and the id,
// so every process and every restart draws the same), an input's vector
// is the mean of its tokens' vectors, normalised to unit length as MLC's
// embedding engine normalises its pooled vectors. Like MLC's decoder
// embedding models (its Qwen3-Embedding path), it appends EOS to each
// input that does not end with it, so an empty text has a vector too.
type embedder struct {
	id        string // the --embedding-model argument: the model's id
	tok       Tokenizer
	vocab     int
	eos       int // appended to every input; -1: none
	seed      uint64
	maxTokens int // tokens of one input at most, EOS included
}

// loadEmbedder loads --embedding-model: TinyEmbedModel, or a directory
// with tokenizer.json whose base name seeds the vectors, whose
// mlc-chat-config.json context_window_size, if any, bounds an input, and
// whose tokenizer's first EOS (tokenizer_config.json's eos_token, else
// generation_config.json's), if any, ends every input.
func loadEmbedder(model string) (*embedder, error) {
	tokModel, seedName, maxTokens := model, TinyEmbedModel, defaultEmbeddingTokens
	if model == TinyEmbedModel {
		tokModel = TinyModel
	} else {
		seedName = filepath.Base(filepath.Clean(model))
		window, err := chat.ContextWindow(model)
		if err != nil {
			return nil, fmt.Errorf("embedding model %q: %w", model, err)
		}
		if window > 0 {
			maxTokens = window
		}
	}
	tok, err := tokenizer.ForModel(tokModel)
	if err != nil {
		return nil, fmt.Errorf("embedding model: %w (the built-in one is %q)", err, TinyEmbedModel)
	}
	m := &embedder{id: model, tok: tok, vocab: tok.VocabSize(), eos: -1, maxTokens: maxTokens}
	for _, id := range tok.EOSTokenIDs() {
		if id >= 0 && id < m.vocab {
			m.eos = id
			break
		}
	}
	h := fnv.New64a()
	h.Write([]byte("embedding:" + seedName))
	m.seed = h.Sum64()
	return m, nil
}

// tokens returns the token ids input i embeds. Token ids are decoded to
// text and encoded again, as MLC's server does before it embeds them, so
// that ids and the text they spell embed alike. An id outside the
// vocabulary is a 400; so is an input longer than maxTokens, which MLC
// would cut short (see protocol.EmbeddingInput.CheckTokens).
func (m *embedder) tokens(in protocol.EmbeddingInput, i int) ([]int, *protocol.Error) {
	p := in.Items[i]
	text := p.Text
	if !p.IsText {
		for j, id := range p.IDs {
			if id >= m.vocab {
				param := fmt.Sprintf("%s[%d]", in.Param(i), j)
				return nil, protocol.InvalidRequest(param, "%s: token id %d is outside the vocabulary of %d", param, id, m.vocab).
					WithCode(protocol.CodeInvalidValue)
			}
		}
		text = m.tok.Decode(p.IDs)
	}
	ids := m.tok.Encode(text)
	if m.eos >= 0 && (len(ids) == 0 || ids[len(ids)-1] != m.eos) {
		ids = append(ids, m.eos)
	}
	if e := in.CheckTokens(i, len(ids), m.maxTokens); e != nil {
		return nil, e
	}
	return ids, nil
}

// embed returns the unit vector of ids: the mean of their vectors,
// normalised. No ids (a tokenizer without EOS, an empty text) give the
// zero vector, which normalisation leaves as it is.
func (m *embedder) embed(ids []int) []float32 {
	var sum [EmbeddingDim]float64
	for _, id := range ids {
		state := m.seed ^ uint64(id)*0x9e3779b97f4a7c15
		for j := range sum {
			// A uniform value in [-1, 1) from the top 53 bits.
			sum[j] += float64(splitmix64(&state)>>11)/(1<<52) - 1
		}
	}
	v := make([]float32, EmbeddingDim)
	if len(ids) > 0 {
		for j := range v {
			v[j] = float32(sum[j] / float64(len(ids)))
		}
	}
	protocol.NormalizeEmbedding(v)
	return v
}

// splitmix64 advances state and returns its next output (Steele, Lea
// and Flood's SplitMix64): fixed here, where math/rand makes no promise
// that its streams stay the same across Go releases.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// embedAll returns the vectors of the inputs, in order, and the tokens
// embedded, or the error of the first input it refuses (before it embeds
// any). It stops early when ctx ends (the client went away).
func (m *embedder) embedAll(ctx context.Context, in protocol.EmbeddingInput) ([][]float32, int, *protocol.Error) {
	all := make([][]int, in.Len())
	for i := range all {
		ids, e := m.tokens(in, i)
		if e != nil {
			return nil, 0, e
		}
		all[i] = ids
	}
	vectors := make([][]float32, len(all))
	total := 0
	for i, ids := range all {
		if err := ctx.Err(); err != nil {
			return nil, 0, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeInvalidRequest, "client closed the request")
		}
		vectors[i] = m.embed(ids)
		total += len(ids)
	}
	return vectors, total, nil
}

// EmbeddingInfo describes the embedding model of an engine.
type EmbeddingInfo struct {
	// ID is the model's id: the --embedding-model argument, as GET
	// /v1/models lists it.
	ID string
	// Dim is the size of its vectors, the most dimensions may ask for.
	Dim int
	// MaxTokens bounds the tokens of one input, counted as usage counts
	// them: with the EOS the model appends.
	MaxTokens int
}

// EmbeddingModelInfo describes the embedding model that an engine started
// with args (`<model> [flags]`, as the fleet starts it) serves; nil
// without --embedding-model.
func EmbeddingModelInfo(args []string) (*EmbeddingInfo, error) {
	opts, err := ParseArgs(args, io.Discard)
	if err != nil || opts.EmbeddingModel == "" {
		return nil, err
	}
	m, err := loadEmbedder(opts.EmbeddingModel)
	if err != nil {
		return nil, err
	}
	return &EmbeddingInfo{ID: m.id, Dim: EmbeddingDim, MaxTokens: m.maxTokens}, nil
}
