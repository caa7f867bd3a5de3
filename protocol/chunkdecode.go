package protocol

import (
	"encoding/json"
	"slices"
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
// model equal to the one c held is kept rather than allocated again, and
// the array of c's choices is written over rather than allocated again,
// so a reader that passes the previous chunk allocates those once per
// stream, not once per chunk (and must be done with its choices).
func ScanCompletionChunk(data []byte, c *CompletionResponse) bool {
	prev := chunkScanner{jsonScanner: jsonScanner{b: data}, id: c.ID, object: c.Object, model: c.Model, choiceArray: c.Choices[:0]}
	*c = CompletionResponse{}
	return prev.chunk(c)
}

// chunkScanner reads the common chunk. Each method reports false when the
// input is not that shape (or not valid); the caller then falls back.
type chunkScanner struct {
	jsonScanner
	// the previous chunk's strings, reused when they come again
	id, object, model string
	choiceArray       []CompletionChoice // the previous chunk's, written over
}

// reuse returns v as a string: old when it is equal, without allocating.
func reuse(v []byte, old string) string {
	if string(v) == old {
		return old
	}
	return string(v)
}

func (s *chunkScanner) chunk(c *CompletionResponse) bool {
	return s.members(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return s.choices(c)
		case "usage":
			if c.Usage != nil {
				return false // encoding/json merges a second usage into the first
			}
			if s.null() {
				return true
			}
			c.Usage = new(Usage)
			return s.usage(c.Usage)
		case "error":
			return s.null()
		case "id", "object", "model":
			v, ok := s.plainString()
			switch string(key) {
			case "id":
				c.ID = reuse(v, s.id)
			case "object":
				c.Object = reuse(v, s.object)
			default:
				c.Model = reuse(v, s.model)
			}
			return ok
		case "created":
			n, ok := s.int()
			c.Created = int64(n)
			return ok
		}
		return false // a field this scanner does not know: encoding/json decides
	}) && s.end()
}

func (s *chunkScanner) choices(c *CompletionResponse) bool {
	c.Choices = s.choiceArray
	if c.Choices == nil {
		c.Choices = []CompletionChoice{}
	}
	return s.elements(func() bool {
		var ch CompletionChoice
		if !s.choice(&ch) {
			return false
		}
		c.Choices = append(c.Choices, ch)
		return true
	})
}

func (s *chunkScanner) choice(ch *CompletionChoice) bool {
	return s.members(func(key []byte) bool {
		switch string(key) {
		case "index":
			var ok bool
			ch.Index, ok = s.int()
			return ok
		case "text":
			v, ok := s.plainString()
			ch.Text = string(v)
			return ok
		case "finish_reason":
			if s.null() {
				return true
			}
			v, ok := s.plainString()
			ch.FinishReason = new(string(v))
			return ok
		case "logprobs":
			return s.null()
		}
		return false
	})
}

// usage reads a usage object whose extra values are integers or plain
// strings, as engines send it at the end of a generation.
func (s *chunkScanner) usage(u *Usage) bool {
	return s.members(func(key []byte) bool {
		var ok bool
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
		}
		return ok
	})
}

// extra reads usage.extra: an object of integers and plain strings, each
// kept as its bytes, as json.RawMessage keeps them.
func (s *chunkScanner) extra(u *Usage) bool {
	u.Extra = map[string]json.RawMessage{}
	return s.members(func(key []byte) bool {
		s.space()
		start := s.i
		var ok bool
		if s.i < len(s.b) && s.b[s.i] == '"' {
			_, ok = s.plainString()
		} else {
			_, ok = s.int()
		}
		u.Extra[string(key)] = json.RawMessage(slices.Clone(s.b[start:s.i]))
		return ok
	})
}
