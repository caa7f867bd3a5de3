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
	eChars = iota // a character in lo..hi
	eEps          // nothing
	eBegin        // nothing, at the string's start only
	eEnd          // nothing, at the string's end only
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

var errTooBig = fmt.Errorf("compiles to more than %d states (MaxPatternStates), or past the compilation's budget (MaxCompileSteps)", MaxPatternStates)

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
// it matches.
func compilePattern(src string, bud *budget) (*cdfa, error) {
	re, err := syntax.Parse(ecmaToRE2(src), syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%q is not a regular expression this server reads: %v", src, err)
	}
	m := &nfa{bud: bud}
	start, loop := m.state(), m.state()
	m.edge(start, nedge{kind: eEps, to: loop})
	m.edge(loop, nedge{kind: eChars, lo: 0, hi: utf8.MaxRune, to: loop})
	ps, pe, err := m.build(re)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", src, err)
	}
	final := m.state()
	m.edge(loop, nedge{kind: eEps, to: ps})
	m.edge(pe, nedge{kind: eEps, to: final})
	m.edge(final, nedge{kind: eChars, lo: 0, hi: utf8.MaxRune, to: final})
	if m.err != nil {
		return nil, fmt.Errorf("%q: %v", src, m.err)
	}
	d, ok := m.determinize(start, final)
	if !ok {
		return nil, fmt.Errorf("%q: %v", src, errTooBig)
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
		return 0, 0, fmt.Errorf("%s is not supported (line anchors, word boundaries)", re)
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

// An element of a subset construction's state: an NFA state, and
// whether the string's end was asserted on the way (then it takes no
// more characters).
func elem(q int32, atEnd bool) int32 {
	if atEnd {
		return q*2 + 1
	}
	return q * 2
}

// closure adds to set what the elements reach without a character;
// atStart: before any character (where ^ holds).
func (m *nfa) closure(set []int32, atStart bool) []int32 {
	seen := map[int32]bool{}
	for _, x := range set {
		seen[x] = true
	}
	stack := slices.Clone(set)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		q, atEnd := x/2, x%2 == 1
		for _, e := range m.edges[q] {
			var y int32
			switch {
			case e.kind == eEps:
				y = elem(e.to, atEnd)
			case e.kind == eBegin && atStart:
				y = elem(e.to, atEnd)
			case e.kind == eEnd:
				y = elem(e.to, true)
			default:
				continue
			}
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

// determinize is the subset construction from start; final accepts.
func (m *nfa) determinize(start, final int32) (*cdfa, bool) {
	key := func(set []int32) string {
		b := make([]byte, 0, 4*len(set))
		for _, x := range set {
			b = strconv.AppendInt(b, int64(x), 36)
			b = append(b, ',')
		}
		return string(b)
	}
	first := m.closure([]int32{elem(start, false)}, true)
	sets := [][]int32{first}
	ids := map[string]int32{key(first): 0}
	d := &cdfa{}
	for k := 0; k < len(sets); k++ {
		set := sets[k]
		acc := false
		type cut struct {
			at  rune
			in  bool
			dst int32
		}
		var cuts []cut
		for _, x := range set {
			q := x / 2
			if q == final {
				acc = true
			}
			if x%2 == 1 {
				continue
			}
			for _, e := range m.edges[q] {
				if e.kind == eChars {
					cuts = append(cuts, cut{e.lo, true, e.to}, cut{e.hi + 1, false, e.to})
				}
			}
		}
		if !m.bud.spend(len(cuts) + len(set)) {
			return nil, false
		}
		slices.SortFunc(cuts, func(a, b cut) int { return int(a.at - b.at) })
		var rs []crange
		active := map[int32]int{}
		for i := 0; i < len(cuts); {
			at := cuts[i].at
			for ; i < len(cuts) && cuts[i].at == at; i++ {
				if cuts[i].in {
					active[cuts[i].dst]++
				} else if active[cuts[i].dst]--; active[cuts[i].dst] == 0 {
					delete(active, cuts[i].dst)
				}
			}
			if len(active) == 0 || i == len(cuts) {
				continue
			}
			hi := cuts[i].at - 1
			targets := make([]int32, 0, len(active))
			for q := range active {
				targets = append(targets, elem(q, false))
			}
			next := m.closure(targets, false)
			kk := key(next)
			id, ok := ids[kk]
			if !ok {
				id = int32(len(sets))
				ids[kk] = id
				sets = append(sets, next)
				if len(sets) > MaxPatternStates {
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
