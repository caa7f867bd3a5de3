package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hand-compiled versions of the split expressions nearly every
// byte-level model uses. regexp2 gets them right but backtracks through
// a general engine; these scan each rune once or twice. They are used
// only when a tokenizer.json's pattern is byte-for-byte one of these,
// and splitfast_test.go checks them against regexp2 on the conformance
// corpus and by fuzzing.
const (
	// llama3Pattern is Llama-3's (and tiktoken cl100k's) pattern.
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// qwen2Pattern is Qwen2's and Qwen3's: single digits.
	qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// fastFinder returns a hand-compiled find function for a known
// pattern, or nil.
func fastFinder(expr string) func([][2]int, string) [][2]int {
	switch expr {
	case llama3Pattern:
		return func(dst [][2]int, s string) [][2]int { return scanAll(dst, s, 3, llama3Match) }
	case qwen2Pattern:
		return func(dst [][2]int, s string) [][2]int { return scanAll(dst, s, 1, llama3Match) }
	case gpt2Pattern:
		return func(dst [][2]int, s string) [][2]int { return scanAll(dst, s, 0, gpt2Match) }
	}
	return nil
}

// scanAll collects successive matches. Every rune starts a match in
// these patterns, so the matches tile s.
func scanAll(dst [][2]int, s string, digits int, match func(s string, i, digits int) int) [][2]int {
	out := dst
	for i := 0; i < len(s); {
		end := match(s, i, digits)
		if end <= i { // cannot happen; never loop forever
			_, size := utf8.DecodeRuneInString(s[i:])
			end = i + size
		}
		out = append(out, [2]int{i, end})
		i = end
	}
	return out
}

func isL(r rune) bool {
	return r < utf8.RuneSelf && (r|0x20 >= 'a' && r|0x20 <= 'z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
}
func isN(r rune) bool { return r >= '0' && r <= '9' || r >= utf8.RuneSelf && unicode.IsNumber(r) }
func isS(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches 's 't 're 've 'm 'll 'd at i (case-folded when
// fold is set) and returns the end, or -1. Case folding is ASCII's plus
// the one other letter that folds to one of these: ſ (U+017F, long s),
// which folds to s, as the reference regexp engines fold it.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	if fold && strings.HasPrefix(s[i+1:], "ſ") {
		return i + 1 + len("ſ")
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return -1
}

// letters returns the end of the run of \p{L} starting at i.
func letters(s string, i int) int {
	for {
		r, size := runeAt(s, i)
		if size == 0 || !isL(r) {
			return i
		}
		i += size
	}
}

// whitespace handles the three white-space alternatives shared by both
// patterns, at i where s has white space: \s*[\r\n]+ (if newlines is
// set), \s+(?!\S), \s+.
func whitespace(s string, i int, newlines bool) int {
	end, lastNL, last := i, -1, i
	for {
		r, size := runeAt(s, end)
		if size == 0 || !isS(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		last = end
		end += size
	}
	if newlines && lastNL >= 0 {
		return lastNL + 1 // \s*[\r\n]+: up to the last newline
	}
	if end == len(s) || last == i {
		return end // \s+(?!\S) at the end of text, or \s+
	}
	return last // \s+(?!\S): leave the last space to the next word
}

// llama3Match matches the Llama-3/Qwen2 pattern at i, with \p{N}{1,digits}.
func llama3Match(s string, i, digits int) int {
	if e := contraction(s, i, true); e >= 0 {
		return e
	}
	r, size := runeAt(s, i)
	switch {
	case isL(r):
		return letters(s, i+size)
	case isN(r):
		e := i + size
		for n := 1; n < digits; n++ {
			r, size := runeAt(s, e)
			if size == 0 || !isN(r) {
				break
			}
			e += size
		}
		return e
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if r != '\r' && r != '\n' {
		if r2, _ := runeAt(s, i+size); r2 >= 0 && isL(r2) {
			return letters(s, i+size)
		}
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if r == ' ' {
		j = i + size
	}
	if r2, _ := runeAt(s, j); r2 >= 0 && isOther(r2) {
		for {
			r, size := runeAt(s, j)
			if size == 0 || !isOther(r) {
				break
			}
			j += size
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return whitespace(s, i, true)
}

// gpt2Match matches the GPT-2 pattern at i.
func gpt2Match(s string, i, _ int) int {
	if e := contraction(s, i, false); e >= 0 {
		return e
	}
	r, size := runeAt(s, i)
	j := i
	if r == ' ' {
		j = i + size
	}
	if r2, size2 := runeAt(s, j); size2 > 0 {
		var class func(rune) bool
		switch {
		case isL(r2):
			class = isL
		case isN(r2):
			class = isN
		case isOther(r2):
			class = isOther
		}
		if class != nil {
			for {
				r, size := runeAt(s, j)
				if size == 0 || !class(r) {
					return j
				}
				j += size
			}
		}
	}
	return whitespace(s, i, false)
}
