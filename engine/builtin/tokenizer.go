package builtin

import (
	"path/filepath"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
)

// TinyModel is the name of the embedded default model.
const TinyModel = tokenizer.TinyModel

// Tokenizer is what the engine tokenizes with: tokenizer.ForModel's.
type Tokenizer = tokenizer.ModelTokenizer

// generatable is implemented by tokenizers that restrict what the model
// may sample (the tiny one, to stay canonical).
type generatable interface {
	Generatable(id int) bool
}

// modelName is the name whose hash seeds the weights: "tiny", or the base
// name of a model directory.
func modelName(model string) string {
	if model == TinyModel {
		return model
	}
	return filepath.Base(filepath.Clean(model))
}

// tokenTable is implemented by tokenizers that know MLC's post-processed
// token table (the tokenizer.json ones).
type tokenTable interface {
	PostProcessedToken(id int) string
}

// tableText returns what gives a token's text as MLC's engine matches
// stop strings against it: its post-processed token table entry, the
// bytes the token stands for. The tiny tokenizer's token strings are
// those bytes.
func tableText(tok Tokenizer) func(id int) string {
	switch t := tok.(type) {
	case tokenTable:
		return t.PostProcessedToken
	case tokenStringer:
		return t.Token
	}
	return func(id int) string { return tok.Decode([]int{id}) }
}
