package jsongrammar

import (
	"slices"
	"unicode/utf8"
)

// crange leads the code points lo..hi to state to.
type crange struct {
	lo, hi rune
	to     int32
}

// cdfa is a deterministic automaton over the characters of a string
// (code points, decoded from the JSON text): what a pattern, a format, an
// enum of strings or property names admit. State 0 is the start; an
// automaton with no state admits nothing.
type cdfa struct {
	trans  [][]crange // per state, sorted and disjoint
	accept []bool
}

func (d *cdfa) empty() bool { return len(d.trans) == 0 }

// find is the index of q's first range that ends at r or after.
func (d *cdfa) find(q int32, r rune) int {
	rs := d.trans[q]
	i, j := 0, len(rs)
	for i < j {
		h := int(uint(i+j) >> 1)
		if rs[h].hi < r {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

// next is the state after r from q, -1 for none.
func (d *cdfa) next(q int32, r rune) int32 {
	rs := d.trans[q]
	if i := d.find(q, r); i < len(rs) && rs[i].lo <= r {
		return rs[i].to
	}
	return -1
}

// matches reports whether d admits s whole.
func (d *cdfa) matches(s string) bool {
	if d.empty() {
		return false
	}
	q := int32(0)
	for _, r := range s {
		if q = d.next(q, r); q < 0 {
			return false
		}
	}
	return d.accept[q]
}

// charset is the automaton of any string of the characters in rs
// (sorted, disjoint ranges; to ignored).
func charset(rs []crange) *cdfa {
	loop := make([]crange, len(rs))
	for i, r := range rs {
		loop[i] = crange{r.lo, r.hi, 0}
	}
	return &cdfa{trans: [][]crange{loop}, accept: []bool{true}}
}

// generatable are the characters a generated string may hold: every
// code point but the surrogates, which JSON text cannot hold alone, and
// the whitespace that ECMA-262's \s matches beyond ASCII's (and its
// line terminators), so that a string generated for a class such as \S
// or . matches it under any regular expression engine a validator uses.
func generatable() []crange {
	var out []crange
	lo := rune(0)
	for _, hole := range [][2]rune{
		{0x0b, 0x0b}, {0x85, 0x85}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
		{0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000},
		{0xd800, 0xdfff}, {0xfeff, 0xfeff},
	} {
		if lo < hole[0] {
			out = append(out, crange{lo, hole[0] - 1, 0})
		}
		lo = hole[1] + 1
	}
	return append(out, crange{lo, utf8.MaxRune, 0})
}

// literals is the automaton of exactly the strings ss.
func literals(ss []string) *cdfa {
	d := &cdfa{trans: [][]crange{nil}, accept: []bool{false}}
	for _, s := range ss {
		q := int32(0)
		for _, r := range s {
			to := d.next(q, r)
			if to < 0 {
				to = int32(len(d.trans))
				d.trans = append(d.trans, nil)
				d.accept = append(d.accept, false)
				rs := d.trans[q]
				i, _ := slices.BinarySearchFunc(rs, r, func(c crange, r rune) int { return int(c.lo - r) })
				d.trans[q] = slices.Insert(rs, i, crange{r, r, to})
			}
			q = to
		}
		d.accept[q] = true
	}
	return d
}

// intersect is the automaton of the strings both a and b admit; false
// when it would pass MaxPatternStates or the budget.
func intersect(a, b *cdfa, bud *budget) (*cdfa, bool) {
	if a.empty() || b.empty() {
		return &cdfa{}, true
	}
	type pair struct{ x, y int32 }
	idx := map[pair]int32{{0, 0}: 0}
	queue := []pair{{0, 0}}
	out := &cdfa{}
	for k := 0; k < len(queue); k++ {
		p := queue[k]
		out.accept = append(out.accept, a.accept[p.x] && b.accept[p.y])
		var rs []crange
		ra, rb := a.trans[p.x], b.trans[p.y]
		for i, j := 0, 0; i < len(ra) && j < len(rb); {
			if !bud.spend(1) {
				return nil, false
			}
			lo, hi := max(ra[i].lo, rb[j].lo), min(ra[i].hi, rb[j].hi)
			if lo <= hi {
				t := pair{ra[i].to, rb[j].to}
				id, ok := idx[t]
				if !ok {
					id = int32(len(queue))
					idx[t] = id
					queue = append(queue, t)
				}
				rs = appendRange(rs, crange{lo, hi, id})
			}
			if ra[i].hi < rb[j].hi {
				i++
			} else {
				j++
			}
		}
		out.trans = append(out.trans, rs)
		if len(queue) > MaxPatternStates {
			return nil, false
		}
	}
	return out.trim(), true
}

// appendRange appends r to rs, merged with the last range when they meet
// and lead to the same state.
func appendRange(rs []crange, r crange) []crange {
	if n := len(rs); n > 0 && rs[n-1].to == r.to && rs[n-1].hi+1 == r.lo {
		rs[n-1].hi = r.hi
		return rs
	}
	return append(rs, r)
}

// complement is the automaton of the strings d does not admit.
func (d *cdfa) complement() *cdfa {
	n := int32(len(d.trans))
	if n == 0 {
		return charset([]crange{{0, utf8.MaxRune, 0}})
	}
	out := &cdfa{trans: make([][]crange, n+1), accept: make([]bool, n+1)}
	for q := range n {
		var rs []crange
		next := rune(0)
		for _, r := range d.trans[q] {
			if next < r.lo {
				rs = appendRange(rs, crange{next, r.lo - 1, n})
			}
			rs = appendRange(rs, r)
			next = r.hi + 1
		}
		if next <= utf8.MaxRune {
			rs = appendRange(rs, crange{next, utf8.MaxRune, n})
		}
		out.trans[q] = rs
		out.accept[q] = !d.accept[q]
	}
	out.trans[n] = []crange{{0, utf8.MaxRune, n}}
	out.accept[n] = true
	return out
}

// trim keeps the states reachable from the start that reach an
// accepting state, renumbered in order of reach.
func (d *cdfa) trim() *cdfa {
	n := len(d.trans)
	if n == 0 {
		return d
	}
	// Co-reachable: backwards from the accepting states.
	back := make([][]int32, n)
	for q, rs := range d.trans {
		for _, r := range rs {
			back[r.to] = append(back[r.to], int32(q))
		}
	}
	live := make([]bool, n)
	var stack []int32
	for q, a := range d.accept {
		if a {
			live[q] = true
			stack = append(stack, int32(q))
		}
	}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range back[q] {
			if !live[p] {
				live[p] = true
				stack = append(stack, p)
			}
		}
	}
	if !live[0] {
		return &cdfa{}
	}
	id := make([]int32, n)
	for i := range id {
		id[i] = -1
	}
	order := []int32{0}
	id[0] = 0
	for k := 0; k < len(order); k++ {
		for _, r := range d.trans[order[k]] {
			if live[r.to] && id[r.to] < 0 {
				id[r.to] = int32(len(order))
				order = append(order, r.to)
			}
		}
	}
	out := &cdfa{trans: make([][]crange, len(order)), accept: make([]bool, len(order))}
	for k, q := range order {
		var rs []crange
		for _, r := range d.trans[q] {
			if live[r.to] {
				rs = appendRange(rs, crange{r.lo, r.hi, id[r.to]})
			}
		}
		out.trans[k] = rs
		out.accept[k] = d.accept[q]
	}
	return out
}

// universal reports whether d admits every string of the generatable
// characters: one accepting state that loops on them all.
func (d *cdfa) universal() bool {
	return len(d.trans) == 1 && d.accept[0] && slices.Equal(d.trans[0], charset(generatable()).trans[0])
}
