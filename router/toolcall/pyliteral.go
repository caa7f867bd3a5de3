package toolcall

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The Python literal reader is hand-written, because no Go library parses
// Python literals; it accepts what ast.literal_eval accepts that JSON can
// hold (strings, ints, floats, True/False/None, lists, tuples, dicts with
// string keys) and writes it as JSON the way Python's json.dumps would.

// maxDepth bounds bracket nesting, so a hostile literal ends as text rather
// than as a deep recursion.
const maxDepth = 64

// pyReader reads Python source from src at pos. depth counts the open
// brackets: inside any, newlines are whitespace, as in Python's tokenizer.
type pyReader struct {
	src   string
	pos   int
	depth int
}

func (r *pyReader) peek() byte {
	if r.pos < len(r.src) {
		return r.src[r.pos]
	}
	return 0
}

// skipSpace skips blanks, comments, line continuations, and, inside
// brackets, newlines.
func (r *pyReader) skipSpace() {
	for r.pos < len(r.src) {
		switch c := r.src[r.pos]; {
		case c == ' ' || c == '\t' || c == '\f':
			r.pos++
		case c == '\n' || c == '\r':
			if r.depth == 0 {
				return
			}
			r.pos++
		case c == '#':
			for r.pos < len(r.src) && r.src[r.pos] != '\n' {
				r.pos++
			}
		case c == '\\' && strings.HasPrefix(r.src[r.pos+1:], "\n"):
			r.pos += 2
		case c == '\\' && strings.HasPrefix(r.src[r.pos+1:], "\r\n"):
			r.pos += 3
		default:
			return
		}
	}
}

// open enters a bracket, refusing to nest past maxDepth.
func (r *pyReader) open() bool {
	r.pos++
	r.depth++
	return r.depth <= maxDepth
}

// close leaves a bracket, if c closes it.
func (r *pyReader) close(c byte) bool {
	if r.peek() != c {
		return false
	}
	r.pos++
	r.depth--
	return true
}

// value reads one literal and appends it to out as JSON.
func (r *pyReader) value(out []byte) ([]byte, bool) {
	r.skipSpace()
	switch c := r.peek(); {
	case c == '[':
		return r.list(out)
	case c == '(':
		return r.paren(out)
	case c == '{':
		return r.dict(out)
	case c == '\'' || c == '"' || r.atStringPrefix():
		s, ok := r.stringLit()
		return appendJSONString(out, s), ok
	case c == '-' || c == '+' || c == '.' || isDigit(c):
		return r.number(out)
	}
	switch r.ident() {
	case "True":
		return append(out, "true"...), true
	case "False":
		return append(out, "false"...), true
	case "None":
		return append(out, "null"...), true
	}
	return out, false
}

// list reads [a, b, …] as a JSON array.
func (r *pyReader) list(out []byte) ([]byte, bool) {
	if !r.open() {
		return out, false
	}
	out = append(out, '[')
	return r.items(out, ']', 0)
}

// items reads the values of a list or tuple up to its closing bracket, n
// of them already written to out, and closes the JSON array.
func (r *pyReader) items(out []byte, end byte, n int) ([]byte, bool) {
	ok := r.seq(end, func() bool {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		var ok bool
		out, ok = r.value(out)
		return ok
	})
	return append(out, ']'), ok
}

// seq reads comma-separated elements up to the byte end that closes the
// bracket already opened, calling each to read every element; a trailing
// comma is allowed, as in Python.
func (r *pyReader) seq(end byte, each func() bool) bool {
	for {
		r.skipSpace()
		if r.close(end) {
			return true
		}
		if !each() {
			return false
		}
		r.skipSpace()
		if r.peek() == ',' {
			r.pos++
		} else if r.peek() != end {
			return false
		}
	}
}

// paren reads (), (a,), (a, b) as JSON arrays and (a) as a.
func (r *pyReader) paren(out []byte) ([]byte, bool) {
	if !r.open() {
		return out, false
	}
	r.skipSpace()
	if r.close(')') {
		return append(out, "[]"...), true
	}
	first, ok := r.value(nil)
	if !ok {
		return out, false
	}
	r.skipSpace()
	if r.close(')') {
		return append(out, first...), true
	}
	if r.peek() != ',' {
		return out, false
	}
	r.pos++
	out = append(append(out, '['), first...)
	return r.items(out, ')', 1)
}

// dict reads {k: v, …} with string keys; a repeated key keeps its first
// place and its last value, as a Python dict does.
func (r *pyReader) dict(out []byte) ([]byte, bool) {
	if !r.open() {
		return out, false
	}
	var d pyDict
	ok := r.seq('}', func() bool {
		if !r.atString() {
			return false
		}
		key, ok := r.stringLit()
		r.skipSpace()
		if !ok || r.peek() != ':' {
			return false
		}
		r.pos++
		val, ok := r.value(nil)
		d.set(key, val)
		return ok
	})
	return d.appendJSON(out), ok
}

// ident reads a Python identifier ("" when there is none at pos).
func (r *pyReader) ident() string {
	start := r.pos
	for r.pos < len(r.src) {
		c, size := utf8.DecodeRuneInString(r.src[r.pos:])
		letter := c == '_' || unicode.IsLetter(c)
		if !letter && (r.pos == start || !unicode.IsDigit(c)) {
			break
		}
		r.pos += size
	}
	return r.src[start:r.pos]
}

// number reads an optionally signed int or float. literal_eval allows one
// sign on a plain number, and Python allows space after it.
func (r *pyReader) number(out []byte) ([]byte, bool) {
	neg := false
	if c := r.peek(); c == '-' || c == '+' {
		neg = c == '-'
		r.pos++
		r.skipSpace()
	}
	start := r.pos
	for r.pos < len(r.src) {
		c := r.src[r.pos]
		exp := (c == '+' || c == '-') && (r.src[r.pos-1] == 'e' || r.src[r.pos-1] == 'E')
		if !isAlnum(c) && c != '_' && c != '.' && !exp {
			break
		}
		r.pos++
	}
	js, ok := pyNumberJSON(r.src[start:r.pos], neg)
	return append(out, js...), ok
}

// pyNumberJSON converts one Python number token to JSON: ints of any size
// and base in decimal, floats as Python's repr writes them.
func pyNumberJSON(tok string, neg bool) (string, bool) {
	if !validUnderscores(tok) {
		return "", false
	}
	t := strings.ReplaceAll(tok, "_", "")
	lower := strings.ToLower(t)
	if base := intBase(lower); base != 10 {
		return bigInt(t[2:], base, neg)
	}
	if strings.ContainsAny(lower, ".e") {
		return pyFloat(lower, neg)
	}
	if len(t) > 1 && t[0] == '0' && strings.Trim(t, "0") != "" {
		return "", false // Python 3 has no leading-zero decimal ints
	}
	return bigInt(t, 10, neg)
}

func intBase(lower string) int {
	switch {
	case strings.HasPrefix(lower, "0x"):
		return 16
	case strings.HasPrefix(lower, "0o"):
		return 8
	case strings.HasPrefix(lower, "0b"):
		return 2
	}
	return 10
}

// validUnderscores checks Python's rule: an underscore sits between two
// digits, or between a base prefix and a digit.
func validUnderscores(tok string) bool {
	digit := isDigit
	base := intBase(strings.ToLower(tok))
	if base == 16 {
		digit = isHexDigit
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] != '_' {
			continue
		}
		afterPrefix := i == 2 && base != 10
		if i == 0 || i == len(tok)-1 || !(digit(tok[i-1]) || afterPrefix) || !digit(tok[i+1]) {
			return false
		}
	}
	return true
}

func bigInt(digits string, base int, neg bool) (string, bool) {
	for i := 0; i < len(digits); i++ {
		if !isAlnum(digits[i]) {
			return "", false
		}
	}
	n, ok := new(big.Int).SetString(digits, base)
	if !ok || digits == "" {
		return "", false
	}
	if neg {
		n.Neg(n)
	}
	return n.String(), true
}

// pyFloat converts a decimal float token; inf (an overflow) is not JSON.
func pyFloat(t string, neg bool) (string, bool) {
	if strings.ContainsAny(t, "abcdfghijklmnopqrstuvwxyz") || !strings.ContainsAny(t, "0123456789") {
		return "", false
	}
	if i := strings.IndexByte(t, 'e'); i >= 0 && !strings.ContainsAny(t[:i], "0123456789") {
		return "", false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", false
	}
	if neg {
		f = -f
	}
	return pyFloatRepr(f), true
}

// pyFloatRepr writes f as Python's repr does: the shortest digits, in
// positional form with at least ".0" for exponents in [-4, 16), else
// scientific form with a signed exponent of two or more digits.
func pyFloatRepr(f float64) string {
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool    { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'z') }
func isHexDigit(c byte) bool { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'f') }
