package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

// TinyModel is the name of the built-in engine's embedded model, whose
// tokenizer is package tiny's.
const TinyModel = "tiny"

// ModelTokenizer is the tokenizer of a model, whichever its kind. The
// built-in engine tokenizes with it, and so does the router for string
// prompts: both get the same ids from [ForModel].
type ModelTokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
	VocabSize() int
	EOSTokenIDs() []int
}

// ForModel returns the tokenizer of model: the tiny tokenizer for
// "tiny", or the tokenizer.json of a model directory.
func ForModel(model string) (ModelTokenizer, error) {
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
	t, err := Load(model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	if t.VocabSize() < 2 {
		return nil, fmt.Errorf("model %q: vocabulary of %d tokens is too small", model, t.VocabSize())
	}
	return t, nil
}
