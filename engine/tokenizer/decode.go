package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A decoder turns the token strings of a sequence back into text. Like
// the reference's Decoder::decode_chain it maps a list of strings to a
// list of strings, which the caller concatenates.
type decoder interface {
	decodeChain(tokens []string) []string
}

// decoderKind reads tokenizer.json's "decoder".
var decoderKind = componentKind[decoder]{
	name:    "decoder",
	members: func(c *componentJSON) []json.RawMessage { return c.Decoders },
	seq:     func(m []decoder) decoder { return decoderSeq(m) },
	build:   buildDecoder,
}

// buildDecoder builds a decoder of any type but Sequence.
func buildDecoder(c *componentJSON) (decoder, error) {
	switch c.Type {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "Replace":
		content, _ := c.contentString()
		p, err := compilePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("decoder Replace: %w", err)
		}
		return replaceDec{p, content}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		content, _ := c.contentString()
		r, size := utf8.DecodeRuneInString(content)
		if size == 0 || size != len(content) {
			return nil, fmt.Errorf("decoder Strip: content %q is not one character", content)
		}
		return stripDec{r, c.Start, c.Stop}, nil
	case "Metaspace":
		m, err := newMetaspace(c)
		if err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
		r, _ := utf8.DecodeRuneInString(m.replacement)
		return metaspaceDec{r, m.scheme != "never"}, nil
	case "BPEDecoder":
		return bpeDec{valueOr(c.Suffix, "</w>")}, nil
	default:
		return nil, fmt.Errorf("decoder %q: %w", c.Type, errUnsupported)
	}
}

// decoderSeq applies its members in order.
type decoderSeq []decoder

func (q decoderSeq) decodeChain(tokens []string) []string {
	for _, d := range q {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// byteLevelDec maps code points back to bytes and the whole sequence
// to one string, invalid UTF-8 replaced.
type byteLevelDec struct{}

func (byteLevelDec) decodeChain(tokens []string) []string {
	n := 0
	for _, t := range tokens {
		n += len(t)
	}
	buf := make([]byte, 0, n)
	for _, t := range tokens {
		buf = byteLevelDecodeToken(buf, t)
	}
	return []string{lossyUTF8(buf)}
}

// replaceDec replaces a pattern in every token ("▁" to " ").
type replaceDec struct {
	p       *pattern
	content string
}

func (d replaceDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		tokens[i] = d.p.replaceAll(t, d.content)
	}
	return tokens
}

// byteFallbackDec turns runs of "<0xXX>" tokens into the text they
// encode; a run that is not valid UTF-8 becomes one U+FFFD per byte.
type byteFallbackDec struct{}

func (byteFallbackDec) decodeChain(tokens []string) []string {
	out := tokens[:0:0]
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range tokens {
		if b, ok := parseByteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// parseByteToken parses a byte-fallback token "<0xXX>".
func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || t[:3] != "<0x" || t[5] != '>' {
		return 0, false
	}
	hi, ok1 := unhex(t[3])
	lo, ok2 := unhex(t[4])
	return hi<<4 | lo, ok1 && ok2
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// fuseDec joins all tokens into one.
type fuseDec struct{}

func (fuseDec) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDec removes up to start leading and stop trailing occurrences of
// a character from each token.
type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		for n := 0; n < d.start; n++ {
			r, size := utf8.DecodeRuneInString(t)
			if size == 0 || r != d.content {
				break
			}
			t = t[size:]
		}
		for n := 0; n < d.stop; n++ {
			r, size := utf8.DecodeLastRuneInString(t)
			if size == 0 || r != d.content {
				break
			}
			t = t[:len(t)-size]
		}
		tokens[i] = t
	}
	return tokens
}

// metaspaceDec turns the replacement character back into spaces; in the
// first token it is dropped when the pre-tokenizer prepends one.
type metaspaceDec struct {
	replacement rune
	dropFirst   bool
}

func (d metaspaceDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		first := i == 0 && d.dropFirst
		tokens[i] = strings.Map(func(r rune) rune {
			if r != d.replacement {
				return r
			}
			if first {
				return -1
			}
			return ' '
		}, t)
	}
	return tokens
}

// bpeDec replaces the end-of-word suffix with a space (none after the
// last token).
type bpeDec struct{ suffix string }

func (d bpeDec) decodeChain(tokens []string) []string {
	for i, t := range tokens {
		repl := " "
		if i == len(tokens)-1 {
			repl = ""
		}
		tokens[i] = strings.ReplaceAll(t, d.suffix, repl)
	}
	return tokens
}
