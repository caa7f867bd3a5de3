package tokenizer

import (
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

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
	case contiguous, mergedWithPrevious:
		// Contiguous joins a segment to the one before it of its kind;
		// merged with previous joins a delimiter to what comes before.
		prevMatch := false
		for _, g := range segs {
			join := g.match == prevMatch
			if sp.behavior == mergedWithPrevious {
				join = g.match && !prevMatch
			}
			if join && len(spans) > 0 {
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
