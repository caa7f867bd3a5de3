package jsongrammar

import (
	"fmt"
	"strconv"
	"strings"
)

// pattern is a simple regular expression: a sequence of atoms, each a set
// of ASCII bytes repeated between min and max times. Its strings never
// need an escape in JSON: '"', '\\' and control bytes are left out of
// every set.
type pattern struct {
	atoms []atom
}

type atom struct {
	set      [4]uint64 // bytes 0..255
	min, max int       // max -1: unbounded
}

func (a *atom) has(b byte) bool { return a.set[b>>6]&(1<<(b&63)) != 0 }
func (a *atom) add(b byte) {
	if b >= 0x20 && b < 0x7f && b != '"' && b != '\\' {
		a.set[b>>6] |= 1 << (b & 63)
	}
}

// maxRepeat bounds a quantifier's count.
const maxRepeat = 256

// parsePattern parses src, which must match the whole string (^...$).
func parsePattern(src string) (*pattern, error) {
	if !strings.HasPrefix(src, "^") || !strings.HasSuffix(src, "$") || strings.HasSuffix(src, `\$`) {
		return nil, fmt.Errorf("%q: only patterns anchored with ^ and $ are supported", src)
	}
	s := src[1 : len(src)-1]
	p := &pattern{}
	for i := 0; i < len(s); {
		var a atom
		switch c := s[i]; c {
		case '[':
			j, err := parseClass(s, i+1, &a)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", src, err)
			}
			i = j
		case '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("%q: a trailing backslash", src)
			}
			if err := escapeClass(s[i+1], &a); err != nil {
				return nil, fmt.Errorf("%q: %v", src, err)
			}
			i += 2
		case '.':
			for b := 0x20; b < 0x7f; b++ {
				a.add(byte(b))
			}
			i++
		case '(', ')', '|', '*', '+', '?', '{', '}', '^', '$':
			return nil, fmt.Errorf("%q: %q is not supported here (groups, alternation and nested anchors are not)", src, c)
		default:
			if c >= 0x80 {
				return nil, fmt.Errorf("%q: only ASCII is supported", src)
			}
			a.add(c)
			i++
		}
		a.min, a.max = 1, 1
		if i < len(s) {
			j, err := parseQuantifier(s, i, &a)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", src, err)
			}
			i = j
		}
		if a.set == [4]uint64{} && a.max != 0 {
			return nil, fmt.Errorf("%q: a class that matches nothing JSON can hold unescaped", src)
		}
		p.atoms = append(p.atoms, a)
	}
	if len(p.atoms) > 64 {
		return nil, fmt.Errorf("%q: more than 64 atoms", src)
	}
	return p, nil
}

func escapeClass(c byte, a *atom) error {
	switch c {
	case 'd':
		for b := byte('0'); b <= '9'; b++ {
			a.add(b)
		}
	case 'w':
		for b := 0x20; b < 0x7f; b++ {
			if isWord(byte(b)) {
				a.add(byte(b))
			}
		}
	case 's':
		a.add(' ')
	case '.', '-', '+', '*', '?', '(', ')', '[', ']', '{', '}', '|', '^', '$', '/', '\\', '"':
		a.add(c)
	default:
		return fmt.Errorf(`\%c is not supported`, c)
	}
	return nil
}

func isWord(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// parseClass parses a [...] class whose body begins at i, returning the
// index after it.
func parseClass(s string, i int, a *atom) (int, error) {
	if i < len(s) && s[i] == '^' {
		return 0, fmt.Errorf("negated classes are not supported")
	}
	for first := true; i < len(s); first = false {
		c := s[i]
		if c == ']' && !first {
			return i + 1, nil
		}
		if c == '\\' {
			if i+1 >= len(s) {
				break
			}
			if err := escapeClass(s[i+1], a); err != nil {
				return 0, err
			}
			i += 2
			continue
		}
		if c >= 0x80 {
			return 0, fmt.Errorf("only ASCII is supported")
		}
		if i+2 < len(s) && s[i+1] == '-' && s[i+2] != ']' {
			hi := s[i+2]
			if hi < c || hi >= 0x80 {
				return 0, fmt.Errorf("bad range %c-%c", c, hi)
			}
			for b := int(c); b <= int(hi); b++ {
				a.add(byte(b))
			}
			i += 3
			continue
		}
		a.add(c)
		i++
	}
	return 0, fmt.Errorf("an unterminated class")
}

// parseQuantifier parses the quantifier at i, if any.
func parseQuantifier(s string, i int, a *atom) (int, error) {
	switch s[i] {
	case '*':
		a.min, a.max = 0, -1
		return i + 1, nil
	case '+':
		a.min, a.max = 1, -1
		return i + 1, nil
	case '?':
		a.min, a.max = 0, 1
		return i + 1, nil
	case '{':
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return 0, fmt.Errorf("an unterminated {")
		}
		body := s[i+1 : i+end]
		lo, hi, comma := strings.Cut(body, ",")
		n, err := strconv.Atoi(lo)
		if err != nil || n < 0 || n > maxRepeat {
			return 0, fmt.Errorf("bad repeat {%s}", body)
		}
		a.min, a.max = n, n
		if comma {
			a.max = -1
			if hi != "" {
				m, err := strconv.Atoi(hi)
				if err != nil || m < n || m > maxRepeat {
					return 0, fmt.Errorf("bad repeat {%s}", body)
				}
				a.max = m
			}
		}
		return i + end + 1, nil
	}
	return i, nil
}

// clip is the count beyond which atom a's behaviour no longer changes.
func (a *atom) clip(n int) int {
	if a.max < 0 {
		return min(n, a.min)
	}
	return n
}
