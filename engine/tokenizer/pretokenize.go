package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A piece is a span of normalized text on its way to the model.
// atStart reports whether it begins at offset 0 of the original input,
// which Metaspace's "first" prepend scheme needs.
type piece struct {
	text    string
	atStart bool
	raw     bool // text still awaits the byte-level mapping (see byteLevelPre.deferMap)
}

// A preTokenizer splits pieces into smaller pieces (and may rewrite
// them, as ByteLevel and Metaspace do). The model encodes each resulting
// piece on its own. preTokenize appends the pieces ps split into to dst
// (which must not alias ps) and may use sc for temporary storage.
type preTokenizer interface {
	preTokenize(sc *scratch, dst, ps []piece) []piece
}

// scratch holds buffers reused across calls to EncodeSpecial.
type scratch struct {
	pieces  [3][]piece
	matches [][2]int
	depth   int // nesting of preTokenizerSeq
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// gpt2Pattern is the split expression ByteLevel uses when use_regex is
// true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// newPreTokenizer builds the pre-tokenizer described by raw; nil means
// none.
func newPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := decodeComponent(raw)
	if err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch c.Type {
	case "Sequence":
		var seq preTokenizerSeq
		for i, r := range c.Pretokenizers {
			p, err := newPreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("pre_tokenizer sequence item %d: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "Split":
		p, err := compilePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		b, err := parseBehavior(c.Behavior)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return &splitter{find: p.findAll, behavior: b, invert: c.Invert}, nil
	case "ByteLevel":
		bl := &byteLevelPre{addPrefixSpace: boolOr(c.AddPrefixSpace, true)}
		if boolOr(c.UseRegex, true) {
			p, err := compilePattern(&patternJSON{Regex: ptr(gpt2Pattern)})
			if err != nil {
				return nil, err
			}
			bl.split = &splitter{find: p.findAll, behavior: isolated}
		}
		return bl, nil
	case "Metaspace":
		return newMetaspace(c)
	case "Whitespace":
		// The reference's \w+|[^\w\s]+, with \w as Rust's regex
		// crate defines it (regexp2's .NET \w lacks spacing marks).
		return &splitter{find: findWordsAndPunct, behavior: removed, invert: true}, nil
	case "WhitespaceSplit":
		return &splitter{find: runeMatcher(unicode.IsSpace), behavior: removed}, nil
	case "Digits":
		b := contiguous
		if c.IndividualDigits {
			b = isolated
		}
		return &splitter{find: runeMatcher(unicode.IsNumber), behavior: b}, nil
	case "Punctuation":
		b := isolated
		if c.Behavior != "" {
			if b, err = parseBehavior(c.Behavior); err != nil {
				return nil, fmt.Errorf("pre_tokenizer Punctuation: %w", err)
			}
		}
		return &splitter{find: runeMatcher(isPunctuation), behavior: b}, nil
	default:
		return nil, fmt.Errorf("pre_tokenizer %q: %w", c.Type, errUnsupported)
	}
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// isPunctuation is Rust's char::is_ascii_punctuation || is_punctuation.
func isPunctuation(r rune) bool {
	return unicode.IsPunct(r) || (r < utf8.RuneSelf && unicode.IsSymbol(r))
}

// preTokenizerSeq applies its members in order.
type preTokenizerSeq []preTokenizer

func (q preTokenizerSeq) preTokenize(sc *scratch, dst, ps []piece) []piece {
	// Intermediate results ping-pong between two scratch buffers, or,
	// in a nested sequence, between fresh ones.
	var bufs [2][]piece
	if sc.depth == 0 {
		bufs = [2][]piece{sc.pieces[1], sc.pieces[2]}
	}
	sc.depth++
	defer func() { sc.depth-- }()
	for i, p := range q {
		if i == len(q)-1 {
			if sc.depth == 1 {
				sc.pieces[1], sc.pieces[2] = bufs[0], bufs[1]
			}
			return p.preTokenize(sc, dst, ps)
		}
		out := p.preTokenize(sc, bufs[i%2][:0], ps)
		bufs[i%2] = out
		ps = out
	}
	return append(dst, ps...)
}

// behavior is the reference's SplitDelimiterBehavior: what becomes of
// the matched delimiters when splitting.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("split behavior %q: %w", s, errUnsupported)
}

// runeMatcher returns a find function matching each rune for which f
// holds, one match per rune.
func runeMatcher(f func(rune) bool) func([][2]int, string) [][2]int {
	return func(out [][2]int, s string) [][2]int {
		for i, r := range s {
			if f(r) {
				out = append(out, [2]int{i, i + utf8.RuneLen(r)})
			}
		}
		return out
	}
}

// isWordRune is \w in Rust's regex crate: Alphabetic, marks, decimal
// digits, connector punctuation and the joiners.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || r >= '0' && r <= '9' || r|0x20 >= 'a' && r|0x20 <= 'z'
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

// findWordsAndPunct finds the matches of \w+|[^\w\s]+.
func findWordsAndPunct(out [][2]int, s string) [][2]int {
	start, class := 0, 0 // class of the current run: 0 space, 1 word, 2 other
	for i, r := range s {
		c := 2
		switch {
		case isWordRune(r):
			c = 1
		case unicode.IsSpace(r):
			c = 0
		}
		if c != class {
			if class != 0 && i > start {
				out = append(out, [2]int{start, i})
			}
			start, class = i, c
		}
	}
	if class != 0 && len(s) > start {
		out = append(out, [2]int{start, len(s)})
	}
	return out
}

// A splitter splits each piece at the matches of find.
type splitter struct {
	find     func(dst [][2]int, s string) [][2]int
	behavior behavior
	invert   bool
}

// segment is a span of a piece and whether it is a delimiter match.
type segment struct {
	start, end int
	match      bool
}

func (sp *splitter) preTokenize(sc *scratch, dst, ps []piece) []piece {
	for _, p := range ps {
		dst = sp.split(sc, dst, p)
	}
	return dst
}

// split appends the pieces p splits into to out, following the
// reference's NormalizedString::split.
func (sp *splitter) split(sc *scratch, out []piece, p piece) []piece {
	s := p.text
	if s == "" {
		return out
	}
	sc.matches = sp.find(sc.matches[:0], s)
	matches := sc.matches
	if sp.behavior == isolated {
		out = slices.Grow(out, 2*len(matches)+1)
		// Every match and every gap is a piece (invert changes nothing).
		prev := 0
		for _, m := range matches {
			if prev != m[0] {
				out = append(out, piece{text: s[prev:m[0]], atStart: p.atStart && prev == 0, raw: p.raw})
			}
			out = append(out, piece{text: s[m[0]:m[1]], atStart: p.atStart && m[0] == 0, raw: p.raw})
			prev = m[1]
		}
		if prev != len(s) {
			out = append(out, piece{text: s[prev:], atStart: p.atStart && prev == 0, raw: p.raw})
		}
		return out
	}

	segs := make([]segment, 0, 2*len(matches)+1)
	prev := 0
	for _, m := range matches {
		if prev != m[0] {
			segs = append(segs, segment{prev, m[0], false})
		}
		segs = append(segs, segment{m[0], m[1], true})
		prev = m[1]
	}
	if prev != len(s) {
		segs = append(segs, segment{prev, len(s), false})
	}
	if sp.invert {
		for i := range segs {
			segs[i].match = !segs[i].match
		}
	}

	// spans are the resulting pieces; drop marks removed delimiters.
	type span struct {
		start, end int
		drop       bool
	}
	spans := make([]span, 0, len(segs))
	switch sp.behavior {
	case removed:
		for _, g := range segs {
			spans = append(spans, span{g.start, g.end, g.match})
		}
	case contiguous:
		prevMatch := false
		for _, g := range segs {
			if g.match == prevMatch && len(spans) > 0 {
				spans[len(spans)-1].end = g.end
			} else {
				spans = append(spans, span{g.start, g.end, false})
			}
			prevMatch = g.match
		}
	case mergedWithPrevious:
		prevMatch := false
		for _, g := range segs {
			if g.match && !prevMatch && len(spans) > 0 {
				spans[len(spans)-1].end = g.end
			} else {
				spans = append(spans, span{g.start, g.end, false})
			}
			prevMatch = g.match
		}
	case mergedWithNext:
		prevMatch := false
		for i := len(segs) - 1; i >= 0; i-- {
			g := segs[i]
			if g.match && !prevMatch && len(spans) > 0 {
				spans[len(spans)-1].start = g.start
			} else {
				spans = append(spans, span{g.start, g.end, false})
			}
			prevMatch = g.match
		}
		slices.Reverse(spans)
	}
	for _, x := range spans {
		if x.drop || x.start == x.end {
			continue
		}
		out = append(out, piece{text: s[x.start:x.end], atStart: p.atStart && x.start == 0, raw: p.raw})
	}
	return out
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

// metaspace is the SentencePiece-style pre-tokenizer: spaces become the
// replacement character (normally "▁"), which is prepended according to
// the prepend scheme, and the text is split before each of them.
type metaspace struct {
	replacement string
	scheme      string // "always", "first" or "never"
	split       bool
	sp          *splitter // before each replacement character
}

func newMetaspace(c *componentJSON) (*metaspace, error) {
	m := &metaspace{replacement: c.Replacement, split: boolOr(c.Split, true)}
	if m.replacement == "" {
		m.replacement = "▁"
	}
	switch c.PrependScheme {
	case "always", "first", "never":
		m.scheme = c.PrependScheme
	case "":
		// Serializations before tokenizers 0.14 have add_prefix_space.
		m.scheme = "never"
		if boolOr(c.AddPrefixSpace, true) {
			m.scheme = "always"
		}
	default:
		return nil, fmt.Errorf("metaspace prepend_scheme %q: %w", c.PrependScheme, errUnsupported)
	}
	lit := &pattern{literal: m.replacement}
	m.sp = &splitter{find: lit.findAll, behavior: mergedWithNext}
	return m, nil
}

func (m *metaspace) preTokenize(sc *scratch, out, ps []piece) []piece {
	for _, p := range ps {
		p.text = strings.ReplaceAll(p.text, " ", m.replacement)
		if !strings.HasPrefix(p.text, m.replacement) &&
			(m.scheme == "always" || (m.scheme == "first" && p.atStart)) {
			p.text = m.replacement + p.text
		}
		if !m.split {
			if p.text != "" {
				out = append(out, p)
			}
			continue
		}
		out = m.sp.split(sc, out, p)
	}
	return out
}
