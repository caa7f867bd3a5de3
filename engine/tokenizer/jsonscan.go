package tokenizer

import (
	"encoding/json"
	"errors"
	"strconv"
)

// The vocabulary and merges make up nearly all of a tokenizer.json
// (Llama-3: 128,000 entries and 280,000 merges) and encoding/json
// spends most of a second on them. jsonScanner reads just those two
// shapes, {"token": id, ...} and ["a b", ...] or [["a", "b"], ...],
// from input that encoding/json has already validated; anything else
// makes it fail so that the caller can fall back to encoding/json.

var errShape = errors.New("unexpected JSON shape")

type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (s *jsonScanner) consume(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a JSON string.
func (s *jsonScanner) str() (string, error) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", errShape
	}
	start := s.i
	escaped := false
	for j := s.i + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			if !escaped {
				return string(s.b[start+1 : j]), nil
			}
			var out string
			if err := json.Unmarshal(s.b[start:j+1], &out); err != nil {
				return "", err
			}
			return out, nil
		}
	}
	return "", errShape
}

// int reads a JSON integer.
func (s *jsonScanner) int() (int, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] >= '0' && s.b[s.i] <= '9') {
		s.i++
	}
	return strconv.Atoi(string(s.b[start:s.i]))
}

// scanVocab parses {"token": id, ...}.
func scanVocab(b []byte) (map[string]int, error) {
	s := &jsonScanner{b: b}
	if !s.consume('{') {
		return nil, errShape
	}
	m := make(map[string]int, len(b)/16)
	if s.consume('}') {
		return m, nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return nil, err
		}
		if !s.consume(':') {
			return nil, errShape
		}
		v, err := s.int()
		if err != nil {
			return nil, err
		}
		m[k] = v
		if s.consume('}') {
			return m, nil
		}
		if !s.consume(',') {
			return nil, errShape
		}
	}
}

// scanMerges parses ["a b", ...] or [["a", "b"], ...].
func scanMerges(b []byte) ([][2]string, error) {
	s := &jsonScanner{b: b}
	if !s.consume('[') {
		return nil, errShape
	}
	out := make([][2]string, 0, len(b)/12)
	if s.consume(']') {
		return out, nil
	}
	for {
		var pair [2]string
		if s.consume('[') {
			a, err := s.str()
			if err != nil {
				return nil, err
			}
			if !s.consume(',') {
				return nil, errShape
			}
			c, err := s.str()
			if err != nil {
				return nil, err
			}
			if !s.consume(']') {
				return nil, errShape
			}
			pair = [2]string{a, c}
		} else {
			m, err := s.str()
			if err != nil {
				return nil, err
			}
			a, c, ok := cutSpace(m)
			if !ok {
				return nil, errShape
			}
			pair = [2]string{a, c}
		}
		out = append(out, pair)
		if s.consume(']') {
			return out, nil
		}
		if !s.consume(',') {
			return nil, errShape
		}
	}
}
