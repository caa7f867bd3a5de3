package tiny

import (
	_ "embed"
	"strings"
)

//go:embed words.txt
var wordList string

// Special token ids.
const (
	BOS = 0 // beginning of sequence; never generated
	EOS = 1 // end of sequence
)

// firstByte is the id of the byte token 0x00; byte b has id firstByte+b.
const firstByte = 2

// symbols are the single-character tokens, after the byte tokens.
const symbols = ".,!?;:'\"-()\n0123456789"

// vocab is the token table, built once.
type vocab struct {
	strs    []string       // id -> token string ("" for specials)
	byPiece map[string]int // word and symbol pieces -> id
	first   int            // first non-byte, non-special id
}

func buildVocab() *vocab {
	v := &vocab{byPiece: map[string]int{}}
	v.strs = append(v.strs, "", "")
	for b := range 256 {
		v.strs = append(v.strs, string([]byte{byte(b)}))
	}
	v.first = len(v.strs)
	for _, r := range symbols {
		v.add(string(r))
	}
	for w := range strings.FieldsSeq(wordList) {
		v.add(" " + w)
	}
	return v
}

func (v *vocab) add(s string) {
	if _, dup := v.byPiece[s]; dup {
		return
	}
	v.byPiece[s] = len(v.strs)
	v.strs = append(v.strs, s)
}
