package jsongrammar

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A pattern is an ECMA-262 regular expression that a string must match
// somewhere (JSON Schema's patterns are not anchored). It is parsed by
// Go's regexp/syntax, the syntax the RE2 family shares with ECMA-262 for
// everything but lookaround and backreferences (refused), and compiled
// to a cdfa: a Thompson automaton, then its subset construction, both
// within the compilation's budget and MaxPatternStates.

// Kinds of an NFA edge.
const (
	eChars    = iota // a character in lo..hi
	eEps             // nothing
	eBegin           // nothing, at the string's start only
	eEnd             // nothing, at the string's end only
	eWordB           // nothing, at a word boundary (\b)
	eNonWordB        // nothing, not at a word boundary (\B)
)

type nedge struct {
	kind   uint8
	lo, hi rune
	to     int32
}

type nfa struct {
	edges [][]nedge
	bud   *budget
	err   error
	wordB bool // it has \b or \B
}

// maxNFAStates bounds a pattern's Thompson automaton.
const maxNFAStates = 4 * MaxPatternStates

func (m *nfa) state() int32 {
	if m.err == nil && (len(m.edges) >= maxNFAStates || !m.bud.spend(1)) {
		m.err = errTooBig
	}
	m.edges = append(m.edges, nil)
	return int32(len(m.edges) - 1)
}

func (m *nfa) edge(from int32, e nedge) { m.edges[from] = append(m.edges[from], e) }

// errTooBig is a string automaton past its bounds.
var errTooBig = &boundError{"MaxPatternStates", fmt.Sprintf("compiles to more than %d states (MaxPatternStates), or past the compilation's budget (MaxCompileSteps)", MaxPatternStates)}

// boundError is an error past a bound, which kwErr names.
type boundError struct{ bound, msg string }

func (e *boundError) Error() string { return e.msg }

// ecmaToRE2 rewrites what ECMA-262 writes otherwise than RE2: \uXXXX,
// \u{X…}, and \d etc. stay.
func ecmaToRE2(src string) string {
	if !strings.Contains(src, `\u`) {
		return src
	}
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\\' || i+1 >= len(src) {
			b.WriteByte(c)
			continue
		}
		if src[i+1] == 'u' {
			if i+6 <= len(src) && isHexString(src[i+2:i+6]) {
				b.WriteString(`\x{` + src[i+2:i+6] + `}`)
				i += 5
				continue
			}
			if i+2 < len(src) && src[i+2] == '{' {
				if end := strings.IndexByte(src[i+2:], '}'); end > 0 && isHexString(src[i+3:i+2+end]) {
					b.WriteString(`\x` + src[i+2:i+3+end])
					i += 2 + end
					continue
				}
			}
		}
		b.WriteByte(c)
		b.WriteByte(src[i+1])
		i++
	}
	return b.String()
}

func isHexString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
}

// compilePattern compiles pattern src to the automaton of the strings
// it matches. A lookahead at the pattern's start (^(?!…) or ^(?=…), as
// Pydantic writes its decimals' pattern) is read: the strings must (not)
// begin with a match of it.
func compilePattern(src string, bud *budget) (*cdfa, error) {
	if rest, look, neg, ok := leadingLookahead(src); ok {
		d, err := compilePattern(rest, bud)
		if err != nil {
			return nil, err
		}
		l, err := compilePattern("^(?:"+look+")", bud)
		if err != nil {
			return nil, err
		}
		if neg {
			l = l.complement()
		}
		if d, ok = intersect(d, l, bud); !ok {
			return nil, &boundError{errTooBig.bound, fmt.Sprintf("%q: %v", src, errTooBig)}
		}
		return d, nil
	}
	return compileSearch(src, bud)
}

// leadingLookahead splits ^(?!look)rest or ^(?=look)rest into ^rest,
// look and whether it is negative.
func leadingLookahead(src string) (rest, look string, neg, ok bool) {
	for _, open := range []string{"^(?!", "^(?="} {
		if !strings.HasPrefix(src, open) {
			continue
		}
		depth, class := 1, false
		for i := len(open); i < len(src); i++ {
			switch c := src[i]; {
			case c == '\\':
				i++
			case class:
				class = c != ']'
			case c == '[':
				class = true
			case c == '(':
				depth++
			case c == ')':
				if depth--; depth == 0 {
					return "^" + src[i+1:], src[len(open):i], open == "^(?!", true
				}
			}
		}
	}
	return "", "", false, false
}

// compileSearch compiles a pattern without lookaround.
func compileSearch(src string, bud *budget) (*cdfa, error) {
	re, err := syntax.Parse(ecmaToRE2(src), syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%q is not a regular expression this server reads: %v", src, err)
	}
	m := &nfa{bud: bud}
	start, loop := m.state(), m.state()
	m.edge(start, nedge{kind: eEps, to: loop})
	m.edge(loop, nedge{kind: eChars, lo: 0, hi: utf8.MaxRune, to: loop})
	ps, pe, err := m.build(re)
	if err == errTooBig {
		return nil, &boundError{errTooBig.bound, fmt.Sprintf("%q: %v", src, err)}
	}
	if err != nil {
		return nil, fmt.Errorf("%q: %v", src, err)
	}
	final := m.state()
	m.edge(loop, nedge{kind: eEps, to: ps})
	m.edge(pe, nedge{kind: eEps, to: final})
	m.edge(final, nedge{kind: eChars, lo: 0, hi: utf8.MaxRune, to: final})
	if m.err != nil {
		return nil, &boundError{errTooBig.bound, fmt.Sprintf("%q: %v", src, m.err)}
	}
	d, ok := m.determinize(start, final)
	if !ok {
		return nil, &boundError{errTooBig.bound, fmt.Sprintf("%q: %v", src, errTooBig)}
	}
	return d, nil
}

// build adds the automaton of re: its start and end states.
func (m *nfa) build(re *syntax.Regexp) (int32, int32, error) {
	if m.err != nil {
		return 0, 0, m.err
	}
	s, e := m.state(), m.state()
	switch re.Op {
	case syntax.OpNoMatch:
	case syntax.OpEmptyMatch:
		m.edge(s, nedge{kind: eEps, to: e})
	case syntax.OpLiteral:
		cur := s
		for i, r := range re.Rune {
			next := e
			if i < len(re.Rune)-1 {
				next = m.state()
			}
			for _, f := range foldOrbit(r, re.Flags&syntax.FoldCase != 0) {
				m.edge(cur, nedge{kind: eChars, lo: f, hi: f, to: next})
			}
			cur = next
		}
		if len(re.Rune) == 0 {
			m.edge(s, nedge{kind: eEps, to: e})
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			m.edge(s, nedge{kind: eChars, lo: re.Rune[i], hi: re.Rune[i+1], to: e})
		}
	case syntax.OpAnyCharNotNL:
		// ECMA-262's '.' matches no line terminator.
		for _, r := range [][2]rune{{0, '\n' - 1}, {'\n' + 1, '\r' - 1}, {'\r' + 1, 0x2027}, {0x202a, utf8.MaxRune}} {
			m.edge(s, nedge{kind: eChars, lo: r[0], hi: r[1], to: e})
		}
	case syntax.OpAnyChar:
		m.edge(s, nedge{kind: eChars, lo: 0, hi: utf8.MaxRune, to: e})
	case syntax.OpBeginText:
		m.edge(s, nedge{kind: eBegin, to: e})
	case syntax.OpEndText:
		m.edge(s, nedge{kind: eEnd, to: e})
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		kind := uint8(eWordB)
		if re.Op == syntax.OpNoWordBoundary {
			kind = eNonWordB
		}
		m.edge(s, nedge{kind: kind, to: e})
		m.wordB = true
	case syntax.OpCapture:
		return m.wrap(s, e, re.Sub[0])
	case syntax.OpConcat:
		cur := s
		for _, sub := range re.Sub {
			ss, se, err := m.build(sub)
			if err != nil {
				return 0, 0, err
			}
			m.edge(cur, nedge{kind: eEps, to: ss})
			cur = se
		}
		m.edge(cur, nedge{kind: eEps, to: e})
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if _, _, err := m.wrap(s, e, sub); err != nil {
				return 0, 0, err
			}
		}
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		ss, se, err := m.build(re.Sub[0])
		if err != nil {
			return 0, 0, err
		}
		m.edge(s, nedge{kind: eEps, to: ss})
		m.edge(se, nedge{kind: eEps, to: e})
		if re.Op != syntax.OpPlus {
			m.edge(s, nedge{kind: eEps, to: e})
		}
		if re.Op != syntax.OpQuest {
			m.edge(se, nedge{kind: eEps, to: ss})
		}
	case syntax.OpRepeat:
		return m.repeat(s, e, re)
	default:
		return 0, 0, fmt.Errorf("%s is not supported (line anchors)", re)
	}
	return s, e, m.err
}

// wrap adds sub between s and e.
func (m *nfa) wrap(s, e int32, sub *syntax.Regexp) (int32, int32, error) {
	ss, se, err := m.build(sub)
	if err != nil {
		return 0, 0, err
	}
	m.edge(s, nedge{kind: eEps, to: ss})
	m.edge(se, nedge{kind: eEps, to: e})
	return s, e, m.err
}

// repeat adds re's sub between re.Min and re.Max times (-1: no most).
func (m *nfa) repeat(s, e int32, re *syntax.Regexp) (int32, int32, error) {
	cur := s
	n := max(re.Min, re.Max)
	for i := range n {
		ss, se, err := m.build(re.Sub[0])
		if err != nil {
			return 0, 0, err
		}
		m.edge(cur, nedge{kind: eEps, to: ss})
		if i >= re.Min {
			m.edge(cur, nedge{kind: eEps, to: e})
		}
		cur = se
	}
	if re.Max < 0 { // at least Min, then any more
		ss, se, err := m.build(re.Sub[0])
		if err != nil {
			return 0, 0, err
		}
		m.edge(cur, nedge{kind: eEps, to: ss})
		m.edge(se, nedge{kind: eEps, to: ss})
		m.edge(se, nedge{kind: eEps, to: e})
	}
	m.edge(cur, nedge{kind: eEps, to: e})
	return s, e, m.err
}

// foldOrbit is r and, under case folding, the runes it folds to.
func foldOrbit(r rune, fold bool) []rune {
	out := []rune{r}
	if !fold {
		return out
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f)
	}
	return out
}

// An element of a subset construction's state: an NFA state and its
// flags: the string's end asserted on the way (then it takes no more
// characters), or a word boundary asserted that the next character
// settles (it must be a word character; or not one, or the end).
const (
	fEnd      = 1
	fWord     = 2
	fNonWord  = 4
	elemFlags = 8
)

func elem(q int32, flags int32) int32 { return q*elemFlags + flags }

// isWordChar reports whether r is a \w character.
func isWordChar(r rune) bool { return r < 0x80 && isWord(byte(r)) }

func isWord(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// wordCuts are where \w's ranges begin and end.
var wordCuts = []rune{'0', '9' + 1, 'A', 'Z' + 1, '_', '_' + 1, 'a', 'z' + 1}

// closure adds to set what the elements reach without a character;
// atStart: before any character (where ^ holds); prevWord: the last
// character is a word character (for \b and \B).
func (m *nfa) closure(set []int32, atStart, prevWord bool) []int32 {
	seen := map[int32]bool{}
	for _, x := range set {
		seen[x] = true
	}
	stack := slices.Clone(set)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		q, f := x/elemFlags, x%elemFlags
		for _, e := range m.edges[q] {
			g := f
			switch {
			case e.kind == eEps, e.kind == eBegin && atStart:
			case e.kind == eEnd:
				g |= fEnd
			case e.kind == eWordB && prevWord, e.kind == eNonWordB && !prevWord:
				g |= fNonWord
			case e.kind == eWordB, e.kind == eNonWordB:
				g |= fWord
			default:
				continue
			}
			if g&fWord != 0 && (g&fNonWord != 0 || g&fEnd != 0) {
				continue // no character is both
			}
			y := elem(e.to, g)
			m.bud.spend(1)
			if !seen[y] {
				seen[y] = true
				set = append(set, y)
				stack = append(stack, y)
			}
		}
	}
	slices.Sort(set)
	return set
}

// determinize is the subset construction from start; final accepts. A
// state is a set of elements and, where the pattern has \b or \B,
// whether the last character was a word character.
func (m *nfa) determinize(start, final int32) (*cdfa, bool) {
	type dstate struct {
		set      []int32
		prevWord bool
	}
	key := func(s dstate) string {
		b := make([]byte, 0, 4*len(s.set)+1)
		if s.prevWord {
			b = append(b, 'w')
		}
		for _, x := range s.set {
			b = strconv.AppendInt(b, int64(x), 36)
			b = append(b, ',')
		}
		return string(b)
	}
	first := dstate{set: m.closure([]int32{elem(start, 0)}, true, false)}
	states := []dstate{first}
	ids := map[string]int32{key(first): 0}
	d := &cdfa{}
	type cut struct {
		at  rune
		in  bool
		dst int32 // -1: only a cut (where \w begins or ends)
	}
	for k := 0; k < len(states); k++ {
		st := states[k]
		acc := false
		var cuts []cut
		if m.wordB {
			for _, at := range wordCuts {
				cuts = append(cuts, cut{at, true, -1})
			}
		}
		for _, x := range st.set {
			q, f := x/elemFlags, x%elemFlags
			if q == final && f&fWord == 0 {
				acc = true
			}
			if f&fEnd != 0 {
				continue
			}
			for _, e := range m.edges[q] {
				if e.kind != eChars {
					continue
				}
				for _, r := range splitWord(e.lo, e.hi) {
					if f&fWord != 0 && !isWordChar(r[0]) || f&fNonWord != 0 && isWordChar(r[0]) {
						continue
					}
					cuts = append(cuts, cut{r[0], true, e.to}, cut{r[1] + 1, false, e.to})
				}
			}
		}
		if !m.bud.spend(len(cuts) + len(st.set)) {
			return nil, false
		}
		slices.SortFunc(cuts, func(a, b cut) int { return int(a.at - b.at) })
		var rs []crange
		active := map[int32]int{}
		for i := 0; i < len(cuts); {
			at := cuts[i].at
			for ; i < len(cuts) && cuts[i].at == at; i++ {
				switch c := cuts[i]; {
				case c.dst < 0:
				case c.in:
					active[c.dst]++
				default:
					if active[c.dst]--; active[c.dst] == 0 {
						delete(active, c.dst)
					}
				}
			}
			if len(active) == 0 || i == len(cuts) {
				continue
			}
			hi := cuts[i].at - 1
			targets := make([]int32, 0, len(active))
			for q := range active {
				targets = append(targets, elem(q, 0))
			}
			next := dstate{prevWord: m.wordB && isWordChar(at)}
			next.set = m.closure(targets, false, next.prevWord)
			kk := key(next)
			id, ok := ids[kk]
			if !ok {
				id = int32(len(states))
				ids[kk] = id
				states = append(states, next)
				if len(states) > MaxPatternStates {
					return nil, false
				}
			}
			rs = appendRange(rs, crange{at, hi, id})
		}
		d.trans = append(d.trans, rs)
		d.accept = append(d.accept, acc)
	}
	return d.trim(), true
}

// splitWord splits lo..hi where \w's ranges begin and end.
func splitWord(lo, hi rune) [][2]rune {
	var out [][2]rune
	for _, at := range wordCuts {
		if at > lo && at <= hi {
			out = append(out, [2]rune{lo, at - 1})
			lo = at
		}
	}
	return append(out, [2]rune{lo, hi})
}
