package protocol

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// jsonScanner reads JSON a value at a time, for the few hot paths where
// encoding/json's reflection costs more than the work it serves (a
// stream's chunks, a request's keys). Its methods skip white space first,
// and report false at anything not of the shape asked for. (engine/tokenizer
// has a scanner of its own, for tokenizer.json; they share a few lines of
// white-space skipping, not their purpose.)
type jsonScanner struct {
	b []byte
	i int
}

// members reads an object, calling field for each member with the
// scanner just past its colon: field reads the value, and reports false
// when it is not a shape the scanner reads.
func (s *jsonScanner) members(field func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok || !s.byte(':') || !field(key) {
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

// elements reads an array, calling elem to read each element, and
// reports false at the first element elem refuses or anything that is
// not an array.
func (s *jsonScanner) elements(elem func() bool) bool {
	if !s.byte('[') {
		return false
	}
	if s.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.byte(']') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// byte consumes c, after white space, if it comes next.
func (s *jsonScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a null, if it comes next.
func (s *jsonScanner) null() bool {
	s.space()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// plainString reads a string without escapes, control characters or
// invalid UTF-8: its bytes are then its value.
func (s *jsonScanner) plainString() ([]byte, bool) {
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
func (s *jsonScanner) int() (int, bool) {
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
func (s *jsonScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// rawString reads a string, after white space, escapes and all: its
// bytes between the quotes.
func (s *jsonScanner) rawString() ([]byte, bool) {
	if !s.byte('"') {
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
func (s *jsonScanner) skipValue() bool {
	depth := 0
	for {
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case '"':
			if _, ok := s.rawString(); !ok {
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
