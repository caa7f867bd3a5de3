package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoding/json matches an object's keys to struct fields ignoring case,
// where MLC-LLM's server (pydantic) and OpenAI's match them exactly: to
// them "Content" is not "content" but an unknown field, and a message
// without its content. A request this package accepts must mean the same
// to an engine, so a key that names a field in another case is refused.
// (encoding/json/v2 matches case-sensitively; until it leaves
// GOEXPERIMENT, this check does that part of its work.)

// checkKeyCase returns an error naming the first key of the JSON object b
// that differs only in case from a field of the struct type t. b that is
// not an object is left to the decoder to refuse.
func checkKeyCase(b []byte, t reflect.Type) error {
	keys := jsonKeys(t)
	var bad error
	objectKeys(b, func(k []byte) bool {
		if keys[string(k)] {
			return true
		}
		key := string(k)
		if bytes.IndexByte(k, '\\') >= 0 {
			if json.Unmarshal(append(append([]byte{'"'}, k...), '"'), &key) != nil || keys[key] {
				return true
			}
		}
		for name := range keys {
			if strings.EqualFold(key, name) {
				bad = &fieldError{param: key, msg: fmt.Sprintf("unknown field %q: field names are case-sensitive (did you mean %q?)", key, name)}
				return false
			}
		}
		return true
	})
	return bad
}

// objectKeys calls yield with each key of the JSON object b, as it is
// written between its quotes (escapes not undone), until yield returns
// false. It reads no value, only skips it, and stops at anything that is
// not well-formed: the decoder refuses that. (It is what a decode into a
// map[string]json.RawMessage found, at a tenth of the cost: every request
// goes through it.)
func objectKeys(b []byte, yield func(key []byte) bool) {
	s := keyScanner{b: b}
	if !s.next('{') || s.next('}') {
		return
	}
	for {
		key, ok := s.str()
		if !ok || !s.next(':') || !s.skipValue() || !yield(key) {
			return
		}
		if !s.next(',') {
			return
		}
	}
}

type keyScanner struct {
	b []byte
	i int
}

// next consumes c, after white space, if it comes next.
func (s *keyScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *keyScanner) space() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// str reads a string, after white space: its bytes between the quotes.
func (s *keyScanner) str() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return s.b[start : s.i-1], true
		}
		s.i++
	}
	return nil, false
}

// skipValue skips one value, after white space: a string, an object or an
// array (their nesting counted, their strings skipped whole), or a
// literal.
func (s *keyScanner) skipValue() bool {
	depth := 0
	for {
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return false
			}
			s.i++
		default: // a literal: up to the next delimiter
			for s.i < len(s.b) && !isDelimiter(s.b[s.i]) {
				s.i++
			}
		}
		if depth == 0 {
			return true
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDelimiter(c byte) bool {
	switch c {
	case ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return isSpace(c)
}

// unmarshalExact is json.Unmarshal into *v, a struct, with its keys
// matched exactly (see checkKeyCase).
func unmarshalExact[T any](b []byte, v *T) error {
	if err := checkKeyCase(b, reflect.TypeFor[T]()); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
