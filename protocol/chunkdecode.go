package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Decoding the chunks of an engine's stream (and a whole generation's
// answer, which has the same shape) is most of what a router
// spends on a streamed token besides its syscalls: encoding/json's
// reflection was a fifth of the router's CPU in the profiles. Almost every
// chunk has the same shape, a choice with a piece of plain text and no
// logprobs, so a scanner reads that shape, and everything else (escaped
// or odd text, logprobs, usage, an error, anything it does not expect)
// goes through encoding/json. The scanner accepts only what encoding/json
// would decode to the same value; FuzzScanCompletionChunk checks it.

// ScanCompletionChunk reads data, a completion stream chunk, into c when
// it has the common shape, and reports whether it did. When it did not,
// c is to be ignored and data decoded with encoding/json, which reads
// every shape and reports errors. c is reset first; an id, object or
// model equal to the one c held is kept rather than allocated again, so
// a reader that passes the previous chunk's copy allocates those strings
// once per stream, not once per chunk.
func ScanCompletionChunk(data []byte, c *CompletionResponse) bool {
	prev := chunkScanner{b: data, id: c.ID, object: c.Object, model: c.Model}
	*c = CompletionResponse{}
	return prev.chunk(c)
}

// chunkScanner reads the common chunk. (engine/tokenizer has a JSON
// scanner of its own, for tokenizer.json; they share a few lines of
// white-space skipping, not their purpose.) Each method reports false when the
// input is not that shape (or not valid); the caller then falls back.
type chunkScanner struct {
	b []byte
	i int
	// the previous chunk's strings, reused when they come again
	id, object, model string
}

// reuse returns v as a string: old when it is equal, without allocating.
func reuse(v []byte, old string) string {
	if string(v) == old {
		return old
	}
	return string(v)
}

func (s *chunkScanner) chunk(c *CompletionResponse) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return s.end()
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		switch string(key) {
		case "choices":
			if !s.choices(c) {
				return false
			}
		case "usage":
			if c.Usage != nil {
				return false // encoding/json merges a second usage into the first
			}
			if !s.null() {
				c.Usage = new(Usage)
				if !s.usage(c.Usage) {
					return false
				}
			}
		case "error":
			if !s.null() {
				return false
			}
		case "id", "object", "model":
			v, ok := s.plainString()
			if !ok {
				return false
			}
			switch string(key) {
			case "id":
				c.ID = reuse(v, s.id)
			case "object":
				c.Object = reuse(v, s.object)
			default:
				c.Model = reuse(v, s.model)
			}
		case "created":
			n, ok := s.int()
			if !ok {
				return false
			}
			c.Created = int64(n)
		default:
			return false // a field this scanner does not know: encoding/json decides
		}
		if s.byte('}') {
			return s.end()
		}
		if !s.byte(',') {
			return false
		}
	}
}

func (s *chunkScanner) choices(c *CompletionResponse) bool {
	if !s.byte('[') {
		return false
	}
	c.Choices = []CompletionChoice{}
	if s.byte(']') {
		return true
	}
	for {
		var ch CompletionChoice
		if !s.choice(&ch) {
			return false
		}
		c.Choices = append(c.Choices, ch)
		if s.byte(']') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

func (s *chunkScanner) choice(ch *CompletionChoice) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		switch string(key) {
		case "index":
			if ch.Index, ok = s.int(); !ok {
				return false
			}
		case "text":
			v, ok := s.plainString()
			if !ok {
				return false
			}
			ch.Text = string(v)
		case "finish_reason":
			if !s.null() {
				v, ok := s.plainString()
				if !ok {
					return false
				}
				ch.FinishReason = new(string(v))
			}
		case "logprobs":
			if !s.null() {
				return false
			}
		default:
			return false
		}
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// usage reads a usage object whose extra values are integers or plain
// strings, as engines send it at the end of a generation.
func (s *chunkScanner) usage(u *Usage) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		switch string(key) {
		case "prompt_tokens":
			u.PromptTokens, ok = s.int()
		case "completion_tokens":
			u.CompletionTokens, ok = s.int()
		case "total_tokens":
			u.TotalTokens, ok = s.int()
		case "extra":
			// encoding/json adds a second extra's keys to the first's map.
			ok = u.Extra == nil && (s.null() || s.extra(u))
		default:
			return false
		}
		if !ok {
			return false
		}
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// extra reads usage.extra: an object of integers and plain strings, each
// kept as its bytes, as json.RawMessage keeps them.
func (s *chunkScanner) extra(u *Usage) bool {
	if !s.byte('{') {
		return false
	}
	u.Extra = map[string]json.RawMessage{}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') {
			return false
		}
		s.space()
		start := s.i
		if s.i < len(s.b) && s.b[s.i] == '"' {
			_, ok = s.plainString()
		} else {
			_, ok = s.int()
		}
		if !ok {
			return false
		}
		u.Extra[string(key)] = json.RawMessage(slices.Clone(s.b[start:s.i]))
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// byte consumes c, after white space, if it comes next.
func (s *chunkScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a null, if it comes next.
func (s *chunkScanner) null() bool {
	s.space()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// plainString reads a string without escapes, control characters or
// invalid UTF-8: its bytes are then its value.
func (s *chunkScanner) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// int reads a JSON integer that fits an int.
func (s *chunkScanner) int() (int, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || s.b[digits] == '0' && s.i-digits > 1 {
		return 0, false // no digits, or a leading zero
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	return n, err == nil
}

// end reports that only white space is left.
func (s *chunkScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *chunkScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
