package toolcall

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// atStringPrefix reports whether pos is at a string prefix literal_eval
// takes (r, u, in either case) right before a quote. b and f prefixes make
// bytes and f-strings, which are not JSON strings, so they are not taken.
func (r *pyReader) atStringPrefix() bool {
	rest := r.src[r.pos:]
	if len(rest) < 2 || !strings.ContainsRune("rRuU", rune(rest[0])) {
		return false
	}
	return rest[1] == '\'' || rest[1] == '"'
}

// atString reports whether a string literal starts at pos.
func (r *pyReader) atString() bool {
	c := r.peek()
	return c == '\'' || c == '"' || r.atStringPrefix()
}

// stringLit reads one or more adjacent string literals, which Python joins.
func (r *pyReader) stringLit() (string, bool) {
	var b strings.Builder
	for {
		if !r.oneString(&b) {
			return "", false
		}
		save := r.pos
		r.skipSpace()
		if !r.atString() {
			r.pos = save
			return b.String(), true
		}
	}
}

// oneString reads one quoted literal, short or triple-quoted, raw or not.
func (r *pyReader) oneString(b *strings.Builder) bool {
	raw := false
	if c := r.peek(); c != '\'' && c != '"' {
		raw = c == 'r' || c == 'R'
		r.pos++
	}
	delim := r.src[r.pos : r.pos+1]
	if strings.HasPrefix(r.src[r.pos:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	r.pos += len(delim)
	for r.pos < len(r.src) {
		switch c := r.src[r.pos]; {
		case strings.HasPrefix(r.src[r.pos:], delim):
			r.pos += len(delim)
			return true
		case (c == '\n' || c == '\r') && len(delim) == 1:
			return false
		case c == '\\':
			if !r.escape(b, raw) {
				return false
			}
		default:
			b.WriteByte(c)
			r.pos++
		}
	}
	return false
}

// escape reads one backslash escape. In a raw string the backslash and the
// next byte stay as they are; Python also keeps unknown escapes whole.
func (r *pyReader) escape(b *strings.Builder, raw bool) bool {
	if r.pos+1 >= len(r.src) {
		return false
	}
	c := r.src[r.pos+1]
	r.pos += 2
	if raw {
		b.WriteByte('\\')
		b.WriteByte(c)
		return true
	}
	if simple := strings.IndexByte(`\'"abfnrtv`, c); simple >= 0 {
		b.WriteByte("\\'\"\a\b\f\n\r\t\v"[simple])
		return true
	}
	switch c {
	case '\n':
		return true // a line continuation
	case 'x':
		return r.codePoint(b, 2)
	case 'u':
		return r.codePoint(b, 4)
	case 'U':
		return r.codePoint(b, 8)
	case 'N':
		return false // named characters need Unicode's name table
	}
	if '0' <= c && c <= '7' {
		r.octal(b, c)
		return true
	}
	b.WriteByte('\\')
	b.WriteByte(c)
	return true
}

// codePoint reads exactly n hex digits as one code point.
func (r *pyReader) codePoint(b *strings.Builder, n int) bool {
	if r.pos+n > len(r.src) {
		return false
	}
	v, err := strconv.ParseUint(r.src[r.pos:r.pos+n], 16, 32)
	if err != nil || v > utf8.MaxRune || strings.ContainsAny(r.src[r.pos:r.pos+n], "+-_") {
		return false
	}
	r.pos += n
	b.WriteRune(rune(v))
	return true
}

// octal reads up to three octal digits, the first (first) already read.
func (r *pyReader) octal(b *strings.Builder, first byte) {
	v := rune(first - '0')
	for i := 0; i < 2 && r.pos < len(r.src) && '0' <= r.src[r.pos] && r.src[r.pos] <= '7'; i++ {
		v = v*8 + rune(r.src[r.pos]-'0')
		r.pos++
	}
	b.WriteRune(v)
}

// appendJSONString appends s as a JSON string. Unlike json.Marshal it does
// not escape <, > and &, so arguments read the way the model wrote them.
func appendJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', byte(c))
		case c == '\n':
			out = append(out, `\n`...)
		case c == '\r':
			out = append(out, `\r`...)
		case c == '\t':
			out = append(out, `\t`...)
		case c < 0x20:
			out = append(out, `\u00`...)
			out = append(out, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			out = utf8.AppendRune(out, c)
		}
	}
	return append(out, '"')
}
