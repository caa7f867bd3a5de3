package tokenizer

import "strings"

// byteToRune and runeToByte implement GPT-2's reversible mapping of the
// 256 byte values onto printable code points: printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100 and up, in order.
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	n := rune(0)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelEncode maps every byte of s to its printable code point.
func byteLevelEncode(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteToRune[s[i]])
	}
	return sb.String()
}

// byteLevelDecodeToken appends the bytes that token stands for to dst.
// Like the reference, a token containing a code point outside the
// mapping (an added token such as "<|im_start|>" is fine, a CJK added
// token is not) contributes its raw UTF-8 bytes instead.
func byteLevelDecodeToken(dst []byte, token string) []byte {
	start := len(dst)
	for _, r := range token {
		b, ok := runeToByte[r]
		if !ok {
			return append(dst[:start], token...)
		}
		dst = append(dst, b)
	}
	return dst
}

// byteLevelPre is the ByteLevel pre-tokenizer: optionally prefix a
// space, optionally split with the GPT-2 expression, then map bytes to
// printable code points.
type byteLevelPre struct {
	addPrefixSpace bool
	split          *splitter
	// deferMap leaves the byte-to-code-point mapping to the model
	// (pieces are marked raw), so that its word cache is consulted
	// before the mapping is done. Set only when this is the last
	// pre-tokenizer.
	deferMap bool
}

func (b *byteLevelPre) preTokenize(sc *scratch, out, ps []piece) []piece {
	start := len(out)
	for _, p := range ps {
		if b.addPrefixSpace && !strings.HasPrefix(p.text, " ") {
			p.text = " " + p.text
		}
		if b.split != nil {
			out = b.split.split(sc, out, p)
		} else if p.text != "" {
			out = append(out, p)
		}
	}
	for i := start; i < len(out); i++ {
		if b.deferMap {
			out[i].raw = true
		} else {
			out[i].text = byteLevelEncode(out[i].text)
		}
	}
	return out
}
