package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// TextChunkEncoder writes the chunks of one stream that carry a piece of
// a choice's text, the router's most frequent write, without reflection:
// the bytes around the choice's index and text are cut once out of a
// chunk json.Marshal wrote, and every chunk is those bytes with its index
// and text in between, escaped as json.Marshal escapes them. The output is
// byte for byte json.Marshal's (TestTextChunkEncoderIsMarshal).
type TextChunkEncoder struct {
	head, mid, tail []byte
}

// textSentinel and indexSentinel mark where the text and the index go in
// the sample chunk.
const (
	textSentinel  = "\x00caddy-mlc-text\x00"
	indexSentinel = 987654321
)

// NewTextChunkEncoder returns the encoder of chunks like the one sample
// returns, given the index and text it must place: sample(indexSentinel,
// textSentinel) is marshalled, and must hold each exactly once, the index
// first.
func NewTextChunkEncoder(sample func(index int, text string) any) (*TextChunkEncoder, error) {
	b, err := json.Marshal(sample(indexSentinel, textSentinel))
	if err != nil {
		return nil, err
	}
	idx := []byte(strconv.Itoa(indexSentinel))
	txt := AppendJSONString(nil, textSentinel)
	i, t := bytes.Index(b, idx), bytes.Index(b, txt)
	if i < 0 || t < i || bytes.Count(b, idx) != 1 || bytes.Count(b, txt) != 1 {
		return nil, fmt.Errorf("protocol: chunk template %s: want the index, then the text, once each", b)
	}
	return &TextChunkEncoder{head: b[:i], mid: b[i+len(idx) : t], tail: b[t+len(txt):]}, nil
}

// Append appends the chunk of index and text to dst.
func (e *TextChunkEncoder) Append(dst []byte, index int, text string) []byte {
	dst = append(dst, e.head...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, e.mid...)
	dst = AppendJSONString(dst, text)
	return append(dst, e.tail...)
}

// AppendJSONString appends s as a JSON string, escaped exactly as
// json.Marshal escapes it: quotes, backslashes and control characters,
// <, > and & (HTML-safe), U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
