package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A normalizer rewrites the text of one section (the text between added
// tokens) before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

// normalizerKind reads tokenizer.json's "normalizer".
var normalizerKind = componentKind[normalizer]{
	name:    "normalizer",
	members: func(c *componentJSON) []json.RawMessage { return c.Normalizers },
	seq:     func(m []normalizer) normalizer { return normalizerSeq(m) },
	build:   buildNormalizer,
}

// buildNormalizer builds a normalizer of any type but Sequence.
func buildNormalizer(c *componentJSON) (normalizer, error) {
	switch c.Type {
	case "NFC":
		return formNormalizer{norm.NFC}, nil
	case "NFD":
		return formNormalizer{norm.NFD}, nil
	case "NFKC":
		return formNormalizer{norm.NFKC}, nil
	case "NFKD":
		return formNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Prepend":
		return prepend(c.Prepend), nil
	case "Replace":
		content, _ := c.contentString()
		p, err := compilePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("normalizer Replace: %w", err)
		}
		return replacer{p, content}, nil
	case "Strip":
		return strip{left: c.Left, right: c.Right}, nil
	case "StripAccents":
		return stripAccents{}, nil
	default:
		return nil, fmt.Errorf("normalizer %q: %w", c.Type, errUnsupported)
	}
}

// normalizerSeq applies its members in order.
type normalizerSeq []normalizer

func (q normalizerSeq) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// formNormalizer applies a Unicode normalization form.
type formNormalizer struct{ f norm.Form }

func (n formNormalizer) normalize(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return n.f.String(s)
		}
	}
	return s // ASCII is in every normalization form
}

// lowercase maps the text to lower case one character at a time, as
// the reference does with Rust's char::to_lowercase: Go's
// unicode.ToLower, except that İ becomes "i̇" (SpecialCasing.txt), and
// without the context-dependent final-sigma rule.
type lowercase struct{}

func (lowercase) normalize(s string) string {
	if !strings.ContainsRune(s, 'İ') {
		return strings.Map(unicode.ToLower, s)
	}
	return strings.ReplaceAll(strings.Map(func(r rune) rune {
		if r == 'İ' {
			return r
		}
		return unicode.ToLower(r)
	}, s), "İ", "i\u0307")
}

// prepend adds a prefix to non-empty text (Llama-2 style "▁").
type prepend string

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

// replacer replaces every match of a pattern.
type replacer struct {
	p       *pattern
	content string
}

func (r replacer) normalize(s string) string { return r.p.replaceAll(s, r.content) }

// strip removes white space at either end.
type strip struct{ left, right bool }

func (n strip) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// stripAccents removes combining marks (meant to follow NFD).
type stripAccents struct{}

func (stripAccents) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.M, r) {
			return -1
		}
		return r
	}, s)
}
