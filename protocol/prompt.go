package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Prompt is a completion prompt: either text, or a list of token ids.
// Its JSON form is a string or an array of integers.
type Prompt struct {
	// Text is the prompt text when the prompt was given as a string.
	Text string
	// IDs are the token ids when the prompt was given as an array.
	IDs []int
	// IsText reports whether the prompt is text (a JSON string).
	IsText bool
}

// TokenPrompt returns a prompt given as token ids.
func TokenPrompt(ids []int) Prompt { return Prompt{IDs: ids} }

// Empty reports whether the prompt holds no text and no tokens.
func (p Prompt) Empty() bool {
	if p.IsText {
		return p.Text == ""
	}
	return len(p.IDs) == 0
}

// Len is the number of tokens of a token-id prompt, or 0 for text.
func (p Prompt) Len() int { return len(p.IDs) }

// MarshalJSON writes the prompt as a JSON string or an array of integers.
func (p Prompt) MarshalJSON() ([]byte, error) { return p.appendJSON(nil), nil }

// appendJSON appends the prompt as MarshalJSON writes it.
func (p Prompt) appendJSON(dst []byte) []byte {
	if p.IsText {
		return AppendJSONString(dst, p.Text)
	}
	return appendJSONArray(dst, p.IDs, func(b []byte, id int) []byte { return strconv.AppendInt(b, int64(id), 10) })
}

// UnmarshalJSON reads a JSON string or an array of integers.
func (p *Prompt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		*p = Prompt{IsText: true}
		return json.Unmarshal(b, &p.Text)
	case len(b) > 0 && b[0] == '[':
		if ids, ok := scanIDs(b); ok {
			*p = Prompt{IDs: ids}
			return nil
		}
		// A null element is no token id (json.Unmarshal would read it
		// into an int as 0).
		var ptrs []*int
		if err := json.Unmarshal(b, &ptrs); err != nil || slices.Contains(ptrs, nil) {
			return &fieldError{param: "prompt", msg: "prompt must be a string or an array of token ids (integers)"}
		}
		ids := make([]int, len(ptrs))
		for i, id := range ptrs {
			ids[i] = *id
		}
		*p = Prompt{IDs: ids}
		return nil
	case bytes.Equal(b, []byte("null")):
		*p = Prompt{}
		return nil
	}
	return &fieldError{param: "prompt", msg: "prompt must be a string or an array of token ids"}
}

// scanIDs reads b, a JSON array of integers written plainly (no
// fraction, no exponent), as json.Unmarshal into []int would, and reports
// false for anything else, which json.Unmarshal then reads or refuses
// (FuzzScanIDs). Every request's prompt of token ids comes this way; the
// scan is a tenth of a reflective decode's cost.
func scanIDs(b []byte) ([]int, bool) {
	s := jsonScanner{b: b}
	ids := make([]int, 0, len(b)/4)
	ok := s.elements(func() bool {
		n, ok := s.int()
		ids = append(ids, n)
		return ok
	})
	if !ok || !s.end() {
		return nil, false
	}
	return ids, true
}
