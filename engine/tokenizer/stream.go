package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// maxHeld is the most ids a StreamDecoder holds back.
const maxHeld = 64

// A StreamDecoder decodes generated tokens one at a time. Push returns
// only whole characters: text ending in an incomplete UTF-8 sequence
// (which decodes to a trailing U+FFFD, or stays invalid UTF-8 with a
// tokenizer that decodes bytes as they are) is held back until later
// tokens complete it. The concatenation of all Push results and the final
// Flush equals Decode of all ids, with one exception: a byte-fallback
// decoder (SentencePiece-style models) turns a whole run of byte tokens
// into one U+FFFD per byte when the run is not valid UTF-8, so invalid
// bytes generated after valid ones in the same run make Decode replace
// text that Push has already returned. Push then goes on with the ids
// it has not returned yet, decoded on their own.
//
// It works like the reference's DecodeStream: it decodes a short window
// of recent ids, so that decoders that look at neighbouring tokens
// (byte fallback, leading-space stripping) see enough context, and
// returns what the newest id adds to the window's text.
//
// It holds back at most maxHeld ids: a longer run that still decodes to
// nothing new, or to text ending in U+FFFD, is not a character being
// completed (none takes more than 4 bytes) but invalid bytes or a long
// row of U+FFFD characters, and is handed out as it stands, so that no
// Push decodes more than about 2*maxHeld ids however long the run.
//
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t      Tokenizer
	ids    []int  // the window: context ids, then ids not yet emitted
	read   int    // ids[:read] is context whose text was already emitted
	prefix string // Decode(ids[:read])
}

// NewStreamDecoder returns a StreamDecoder for t.
func NewStreamDecoder(t Tokenizer) *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Push adds the next id and returns the text it completes, possibly
// empty.
func (d *StreamDecoder) Push(id int) string {
	d.ids = append(d.ids, id)
	text := d.t.Decode(d.ids)
	if !strings.HasPrefix(text, d.prefix) {
		// Text already returned was revised; it cannot be taken back.
		d.ids = append(d.ids[:0], d.ids[d.read:]...)
		d.read, d.prefix = 0, ""
		text = d.t.Decode(d.ids)
	}
	last, _ := utf8.DecodeLastRuneInString(text) // RuneError: U+FFFD or an invalid byte
	incomplete := len(text) <= len(d.prefix) || last == utf8.RuneError
	if incomplete && len(d.ids)-d.read < maxHeld {
		return ""
	}
	out := text[len(d.prefix):]
	d.ids = append(d.ids[:0], d.ids[d.read:]...)
	d.read = len(d.ids)
	d.prefix = d.t.Decode(d.ids)
	return out
}

// Flush returns the text held back (an incomplete character comes out
// as U+FFFD) and resets the decoder for a new sequence.
func (d *StreamDecoder) Flush() string {
	text := d.t.Decode(d.ids)
	out := ""
	if len(text) > len(d.prefix) && strings.HasPrefix(text, d.prefix) {
		out = text[len(d.prefix):]
	}
	d.ids, d.read, d.prefix = d.ids[:0], 0, ""
	return out
}
