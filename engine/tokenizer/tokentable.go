package tokenizer

import (
	"strings"
	"sync"
)

// Post-processing methods of MLC-LLM's token table
// (Tokenizer::PostProcessTokenTable in cpp/tokenizers/tokenizers.cc).
const (
	postprocByteFallback = "byte_fallback"
	postprocByteLevel    = "byte_level"
)

// tokenTable is the lazily built post-processed token table.
type tokenTable struct {
	once    sync.Once
	entries []string
}

// PostProcessedToken returns the bytes that token id stands for, as
// MLC-LLM's post-processed token table has them, which its engine matches
// stop strings against and names tokens by: for a byte-level vocabulary
// (a ByteLevel decoder) the token's code points mapped back to bytes;
// otherwise "<0xXX>" becomes that byte and "▁" a space. Unlike Decode of
// the id alone, it keeps a token's leading space and a lone byte of a
// multi-byte character as it is (not U+FFFD). Added tokens read as their
// content. "" for an id with no token.
func (t *HF) PostProcessedToken(id int) string {
	t.table.once.Do(t.buildTokenTable)
	if id < 0 || id >= len(t.table.entries) {
		return ""
	}
	return t.table.entries[id]
}

func (t *HF) buildTokenTable() {
	method := postprocMethod(t.decoder)
	t.table.entries = make([]string, len(t.idToToken))
	for id, tok := range t.idToToken {
		t.table.entries[id] = postProcessToken(tok, method)
	}
}

// postprocMethod detects the post-processing method from the decoder as
// MLC's DetectTokenizerInfo does: ByteLevel or ByteFallback, the last one
// of a Sequence that has either, else byte_fallback.
func postprocMethod(d decoder) string {
	method := postprocByteFallback
	seq, ok := d.(decoderSeq)
	if !ok {
		seq = decoderSeq{d}
	}
	for _, d := range seq {
		switch d.(type) {
		case byteLevelDec:
			method = postprocByteLevel
		case byteFallbackDec:
			method = postprocByteFallback
		}
	}
	return method
}

// postProcessToken is MLC's PostProcessToken.
func postProcessToken(tok, method string) string {
	if method == postprocByteLevel {
		return string(byteLevelDecodeToken(nil, tok))
	}
	if b, ok := parseByteToken(tok); ok {
		return string([]byte{b})
	}
	return strings.ReplaceAll(tok, "\u2581", " ")
}
