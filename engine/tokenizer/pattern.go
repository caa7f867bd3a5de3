package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// errUnsupported marks tokenizer.json features this package does not
// implement.
var errUnsupported = errors.New("not supported")

// A pattern is a Split or Replace pattern: a literal string or a regular
// expression.
//
// The reference implementation compiles regular expressions with
// Oniguruma, and the split patterns of Llama-3, Qwen2 and GPT-2 use
// look-ahead ("\s+(?!\S)"), which Go's regexp (RE2) lacks. regexp2 in
// its default (.NET) mode supports it and agrees with Oniguruma where it
// matters here: \s is Unicode White_Space, \p{L} and \p{N} are Unicode
// general categories, (?i:...) is allowed inline.
type pattern struct {
	literal string
	re      *regexp2.Regexp
	fast    func(dst [][2]int, s string) [][2]int // hand-compiled re, when known
}

// compilePattern compiles a {"String": ...} or {"Regex": ...} pattern.
func compilePattern(p *patternJSON) (*pattern, error) {
	switch {
	case p == nil:
		return nil, errors.New("missing pattern")
	case p.String != nil:
		if *p.String == "" {
			return nil, errors.New("empty string pattern")
		}
		return &pattern{literal: *p.String}, nil
	case p.Regex != nil:
		re, err := regexp2.Compile(*p.Regex,
			regexp2.None,
			// Long runs of white space backtrack deeply in "\s+(?!\S)";
			// never fail a match for want of stack.
			regexp2.OptionMaxBacktrackingStackSize(-1))
		if err != nil {
			return nil, fmt.Errorf("compiling %q: %w", *p.Regex, err)
		}
		return &pattern{re: re, fast: fastFinder(*p.Regex)}, nil
	default:
		return nil, errors.New("pattern is neither String nor Regex")
	}
}

// findAll appends to dst the byte offsets [start, end) of the
// successive non-overlapping, non-empty matches in s.
func (p *pattern) findAll(dst [][2]int, s string) [][2]int {
	out := dst
	if p.re == nil {
		for off := 0; ; {
			i := strings.Index(s[off:], p.literal)
			if i < 0 {
				return out
			}
			start := off + i
			off = start + len(p.literal)
			out = append(out, [2]int{start, off})
		}
	}
	if p.fast != nil {
		return p.fast(dst, s)
	}
	return p.regexpFindAll(dst, s)
}

// regexpFindAll is findAll with regexp2 only.
func (p *pattern) regexpFindAll(dst [][2]int, s string) [][2]int {
	idx, err := p.re.FindAllStringIndex(s, -1)
	if err != nil {
		// Only a timeout or stack limit can fail a match, and neither is
		// set; should one happen anyway, treat the text as unmatched
		// rather than panic on user input.
		return dst
	}
	out := dst
	for _, m := range idx {
		if m[1] > m[0] {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	return out
}

// replaceAll replaces every match in s with repl, taken literally.
func (p *pattern) replaceAll(s, repl string) string {
	if p.re == nil {
		return strings.ReplaceAll(s, p.literal, repl)
	}
	ms := p.findAll(nil, s)
	if len(ms) == 0 {
		return s
	}
	var sb strings.Builder
	last := 0
	for _, m := range ms {
		sb.WriteString(s[last:m[0]])
		sb.WriteString(repl)
		last = m[1]
	}
	sb.WriteString(s[last:])
	return sb.String()
}
