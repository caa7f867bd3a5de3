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

// strThen reads a JSON string and then the byte sep that must follow
// it.
func (s *jsonScanner) strThen(sep byte) (string, error) {
	v, err := s.str()
	if err != nil {
		return "", err
	}
	if !s.consume(sep) {
		return "", errShape
	}
	return v, nil
}

// members reads an object or array delimited by open and close, calling
// member to read each of its comma-separated members.
func (s *jsonScanner) members(open, close byte, member func() error) error {
	if !s.consume(open) {
		return errShape
	}
	if s.consume(close) {
		return nil
	}
	for {
		if err := member(); err != nil {
			return err
		}
		if s.consume(close) {
			return nil
		}
		if !s.consume(',') {
			return errShape
		}
	}
}

// scanVocab parses {"token": id, ...}.
func scanVocab(b []byte) (map[string]int, error) {
	s := &jsonScanner{b: b}
	m := make(map[string]int, len(b)/16)
	err := s.members('{', '}', func() error {
		k, err := s.strThen(':')
		if err != nil {
			return err
		}
		v, err := s.int()
		if err != nil {
			return err
		}
		m[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// scanMerges parses ["a b", ...] or [["a", "b"], ...].
func scanMerges(b []byte) ([][2]string, error) {
	s := &jsonScanner{b: b}
	out := make([][2]string, 0, len(b)/12)
	err := s.members('[', ']', func() error {
		pair, err := s.merge()
		if err != nil {
			return err
		}
		out = append(out, pair)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// merge reads one merge, "a b" or ["a", "b"].
func (s *jsonScanner) merge() ([2]string, error) {
	if s.consume('[') {
		a, err := s.strThen(',')
		if err != nil {
			return [2]string{}, err
		}
		c, err := s.strThen(']')
		if err != nil {
			return [2]string{}, err
		}
		return [2]string{a, c}, nil
	}
	m, err := s.str()
	if err != nil {
		return [2]string{}, err
	}
	a, c, ok := cutSpace(m)
	if !ok {
		return [2]string{}, errShape
	}
	return [2]string{a, c}, nil
}
