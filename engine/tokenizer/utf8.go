package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// validUTF8 replaces each invalid byte of s with U+FFFD.
func validUTF8(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) + 16)
	for _, r := range s {
		sb.WriteRune(r)
	}
	return sb.String()
}

// lossyUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence with one U+FFFD, as Rust's String::from_utf8_lossy and the
// WHATWG TextDecoder do (Go's strings.ToValidUTF8 would collapse runs of
// them instead, and a plain conversion would keep them).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[:size])
			b = b[size:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart returns the length (at least 1) of the longest prefix
// of b that starts a well-formed UTF-8 sequence but is not a whole one.
func maximalSubpart(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return i
}
