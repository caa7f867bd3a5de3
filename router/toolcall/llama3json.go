package toolcall

import (
	"encoding/json"
	"strings"
)

// pythonTag is the token Llama 3.1/3.2 may put before its JSON calls.
const pythonTag = "<|python_tag|>"

// llama3CouldStart reports whether output (left-trimmed, non-empty) may
// still be a llama3_json call list: it starts with "{" or with the python
// tag, or is a prefix of the tag so far.
func llama3CouldStart(t string) bool {
	return t[0] == '{' || strings.HasPrefix(t, pythonTag) || strings.HasPrefix(pythonTag, t)
}

// parseLlama3 reads the whole output: an optional python tag, then one or
// more JSON call objects separated by ";". All or nothing.
func parseLlama3(output string) ([]Call, bool) {
	s := strings.TrimLeft(output, spaceChars)
	s = strings.TrimPrefix(s, pythonTag)
	var calls []Call
	for {
		s = strings.TrimLeft(s, spaceChars)
		if s == "" {
			break
		}
		raw, rest, ok := nextJSON(s)
		if !ok {
			return nil, false
		}
		c, ok := jsonCall(raw)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		s = strings.TrimLeft(rest, spaceChars)
		if s != "" && s[0] != ';' {
			return nil, false
		}
		s = strings.TrimPrefix(s, ";")
	}
	return calls, len(calls) > 0
}

// nextJSON splits one JSON value off the start of s.
func nextJSON(s string) (json.RawMessage, string, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil, "", false
	}
	return raw, s[dec.InputOffset():], true
}
