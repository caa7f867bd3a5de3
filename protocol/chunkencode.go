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

// AppendJSON appends r as json.Marshal encodes it, byte for byte
// (FuzzCompletionResponseAppendJSON), writing its fields by hand: a
// built-in engine encodes one per token it streams, and a router one per
// whole answer, where reflection was most of the cost. Logprobs and usage
// extras, rare, go through json.Marshal.
func (r CompletionResponse) AppendJSON(dst []byte) ([]byte, error) {
	e := objectEncoder{b: append(dst, '{')}
	e.str("id", r.ID)
	e.str("object", r.Object)
	e.int("created", r.Created)
	e.str("model", r.Model)
	e.key("choices")
	if r.Choices == nil {
		e.b = append(e.b, "null"...)
	} else {
		e.b = append(e.b, '[')
		for i := range r.Choices {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			c := &r.Choices[i]
			ce := objectEncoder{b: append(e.b, '{')}
			ce.int("index", int64(c.Index))
			ce.str("text", c.Text)
			ce.key("finish_reason")
			if c.FinishReason == nil {
				ce.b = append(ce.b, "null"...)
			} else {
				ce.b = AppendJSONString(ce.b, *c.FinishReason)
			}
			ce.key("logprobs")
			var err error
			if ce.b, err = appendMarshal(ce.b, c.Logprobs); err != nil {
				return nil, err
			}
			e.b = append(ce.b, '}')
		}
		e.b = append(e.b, ']')
	}
	if u := r.Usage; u != nil {
		e.key("usage")
		ue := objectEncoder{b: append(e.b, '{')}
		ue.int("prompt_tokens", int64(u.PromptTokens))
		ue.int("completion_tokens", int64(u.CompletionTokens))
		ue.int("total_tokens", int64(u.TotalTokens))
		if d := u.PromptTokensDetails; d != nil {
			ue.key("prompt_tokens_details")
			de := objectEncoder{b: append(ue.b, '{')}
			de.int("cached_tokens", int64(d.CachedTokens))
			ue.b = append(de.b, '}')
		}
		if len(u.Extra) > 0 {
			b, err := json.Marshal(u.Extra)
			if err != nil {
				return nil, err
			}
			ue.key("extra")
			ue.b = append(ue.b, b...)
		}
		e.b = append(ue.b, '}')
	}
	return append(e.b, '}'), nil
}

// appendMarshal appends json.Marshal's encoding of v ("null" for a nil
// pointer, without calling it).
func appendMarshal[T any](dst []byte, v *T) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	b, err := json.Marshal(v)
	return append(dst, b...), err
}
