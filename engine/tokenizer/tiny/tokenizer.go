package tiny

import (
	"strings"
	"sync"
)

// Tokenizer is the tiny model's tokenizer. It is safe for concurrent use.
type Tokenizer struct {
	v *vocab
}

// shared is the tiny tokenizer, built once and only read.
var shared = sync.OnceValue(func() *Tokenizer { return &Tokenizer{v: buildVocab()} })

// New returns the tiny tokenizer.
func New() *Tokenizer { return shared() }

// VocabSize is the number of token ids.
func (t *Tokenizer) VocabSize() int { return len(t.v.strs) }

// EOSTokenIDs returns the ids that end a generation.
func (t *Tokenizer) EOSTokenIDs() []int { return []int{EOS} }

// Generatable reports whether the model may sample id: symbols, words and
// EOS. Byte tokens and BOS are never sampled, which keeps generated text
// canonical.
func (t *Tokenizer) Generatable(id int) bool {
	return id == EOS || (id >= t.v.first && id < len(t.v.strs))
}

// Token returns the string of token id ("" for special or unknown ids).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.v.strs) {
		return ""
	}
	return t.v.strs[id]
}

// Decode concatenates the strings of ids. Special and out-of-range ids
// decode to nothing.
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Token(id))
	}
	return b.String()
}

// Encode splits s into pieces and maps each to its token, or to its bytes
// when the vocabulary lacks it.
func (t *Tokenizer) Encode(s string) []int {
	ids := make([]int, 0, len(s)/4+1)
	for i := 0; i < len(s); {
		n := pieceLen(s[i:])
		if id, ok := t.v.byPiece[s[i:i+n]]; ok {
			ids = append(ids, id)
		} else {
			for j := i; j < i+n; j++ {
				ids = append(ids, firstByte+int(s[j]))
			}
		}
		i += n
	}
	return ids
}

// pieceLen returns the length of the piece s starts with: a space and the
// letters after it, a run of letters, or one byte.
func pieceLen(s string) int {
	start := 0
	if s[0] == ' ' {
		start = 1
	}
	n := start
	for n < len(s) && isLetter(s[n]) {
		n++
	}
	if n == start {
		return 1
	}
	return n
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
