package builtin

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/tiny"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
)

// TinyModel is the name of the embedded default model.
const TinyModel = "tiny"

// Tokenizer is what the engine tokenizes with. A router that tokenizes
// string prompts with the value [LoadTokenizer] returns gets the engine's
// own ids.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
	VocabSize() int
	EOSTokenIDs() []int
}

// generatable is implemented by tokenizers that restrict what the model
// may sample (the tiny one, to stay canonical).
type generatable interface {
	Generatable(id int) bool
}

// LoadTokenizer returns the tokenizer the engine uses for model: the tiny
// tokenizer for "tiny", or the tokenizer.json of a model directory.
func LoadTokenizer(model string) (Tokenizer, error) {
	if model == TinyModel {
		return tiny.New(), nil
	}
	st, err := os.Stat(filepath.Join(model, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("model %q: want %q or a directory with tokenizer.json: %w", model, TinyModel, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("model %q: tokenizer.json is a directory", model)
	}
	t, err := tokenizer.Load(model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	if t.VocabSize() < 2 {
		return nil, fmt.Errorf("model %q: vocabulary of %d tokens is too small", model, t.VocabSize())
	}
	return t, nil
}

// modelName is the name whose hash seeds the weights: "tiny", or the base
// name of a model directory.
func modelName(model string) string {
	if model == TinyModel {
		return model
	}
	return filepath.Base(filepath.Clean(model))
}
