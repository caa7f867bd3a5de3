package jsongrammar

import "fmt"

// strNode is a string: its characters a path of the automaton d, their
// number between min and max. A generation bound (Bounds.String) is
// folded into max where the schema allows it. What may come next is
// decided per character, so that every string begun can end: a
// character is admitted only if, after it, an accepting state is reached
// within the lengths left.
type strNode struct {
	d         *cdfa
	min, max  int  // characters; max -1: none
	smax      int  // the schema's max, before the generation bound
	universal bool // d admits every string: the lengths alone decide
	// reach[q], when max ≥ 0 and d is not universal: bit l set when an
	// accepting state is l characters from q (l ≤ max).
	reach [][]uint64
	// longest[q], when max < 0 and d is not universal: the longest way
	// from q to an accepting state (-1: unbounded).
	longest []int32
}

// maxReachWords bounds a string's length tables.
const maxReachWords = 1 << 20

// newStrNode builds the string of d's strings with between minLen and
// maxLen characters (-1: no most), and at most capLen when the schema
// allows it (0: no cap). Its automaton empty when none can be written.
func newStrNode(d *cdfa, minLen, maxLen, capLen int, bud *budget) (*strNode, error) {
	d, ok := intersect(d, charset(generatable()), bud)
	if !ok {
		return nil, errTooBig
	}
	s := &strNode{d: d, min: minLen, max: maxLen, smax: maxLen}
	if d.empty() || maxLen >= 0 && maxLen < minLen {
		return &strNode{d: &cdfa{}, max: -1, smax: -1}, nil
	}
	s.universal = d.universal()
	least := minLen
	if !s.universal {
		// The least length from minLen up: within minLen + states (a
		// longer one loses a cycle and stays at least minLen).
		b := minLen + len(d.trans)
		if maxLen >= 0 {
			b = min(b, maxLen)
		}
		var ok bool
		if least, ok = leastLength(d, minLen, b, bud); !ok {
			return nil, budgetError()
		}
		if least < 0 {
			return &strNode{d: &cdfa{}, max: -1, smax: -1}, nil
		}
	}
	if capLen > 0 {
		c := max(capLen, least)
		if s.max < 0 || c < s.max {
			s.max = c
		}
	}
	switch {
	case s.universal:
	case s.max >= 0:
		r, err := reachTable(d, s.max, bud)
		if err != nil {
			return nil, err
		}
		s.reach = r
	default:
		s.longest = longestPaths(d)
	}
	return s, nil
}

// leastLength is the least length in lo..hi of a string of d, -1 for
// none: the states reached from the start, layer by layer, until one
// accepts.
func leastLength(d *cdfa, lo, hi int, bud *budget) (int, bool) {
	cur := map[int32]bool{0: true}
	for l := 0; l <= hi && len(cur) > 0; l++ {
		if l >= lo {
			for q := range cur {
				if d.accept[q] {
					return l, true
				}
			}
		}
		next := map[int32]bool{}
		for q := range cur {
			if !bud.spend(len(d.trans[q]) + 1) {
				return 0, false
			}
			for _, r := range d.trans[q] {
				next[r.to] = true
			}
		}
		cur = next
	}
	return -1, true
}

// reachTable is, per state, the lengths (up to n) of its ways to an
// accepting state.
func reachTable(d *cdfa, n int, bud *budget) ([][]uint64, error) {
	words := n/64 + 1
	if len(d.trans)*words > maxReachWords {
		return nil, &boundError{"MaxPatternStates", fmt.Sprintf("its states times its length (%d × %d) are past the bound of its length tables", len(d.trans), n)}
	}
	r := make([][]uint64, len(d.trans))
	for q := range r {
		r[q] = make([]uint64, words)
		if d.accept[q] {
			r[q][0] = 1
		}
	}
	// Layer by layer: a length l from q is a length l-1 from a successor.
	cur := make([]bool, len(d.trans))
	for q := range cur {
		cur[q] = d.accept[q]
	}
	for l := 1; l <= n; l++ {
		next := make([]bool, len(d.trans))
		any := false
		for q, rs := range d.trans {
			if !bud.spend(len(rs) + 1) {
				return nil, budgetError()
			}
			for _, x := range rs {
				if cur[x.to] {
					next[q] = true
					break
				}
			}
			if next[q] {
				r[q][l>>6] |= 1 << (l & 63)
				any = true
			}
		}
		if !any {
			break
		}
		cur = next
	}
	return r, nil
}

// longestPaths is, per state of a trimmed automaton, its longest way to
// an accepting state, -1 when a cycle makes it unbounded.
func longestPaths(d *cdfa) []int32 {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]uint8, len(d.trans))
	out := make([]int32, len(d.trans))
	var visit func(q int32) int32
	visit = func(q int32) int32 {
		switch mark[q] {
		case open:
			return -1
		case done:
			return out[q]
		}
		mark[q] = open
		best := int32(0)
		for _, r := range d.trans[q] {
			l := visit(r.to)
			if l < 0 {
				best = -1
				break
			}
			best = max(best, l+1)
		}
		mark[q], out[q] = done, best
		return best
	}
	for q := range d.trans {
		visit(int32(q))
	}
	return out
}

// lenOK reports whether a string at state q with n characters may still
// end within its lengths.
func (s *strNode) lenOK(q int32, n int) bool {
	if s.max >= 0 && n > s.max {
		return false
	}
	switch {
	case s.universal:
		return s.max < 0 || max(n, s.min) <= s.max
	case s.max >= 0:
		return hasBit(s.reach[q], max(0, s.min-n), s.max-n)
	}
	return s.longest[q] < 0 || n+int(s.longest[q]) >= s.min
}

// closeOK reports whether the string may end at state q after n characters.
func (s *strNode) closeOK(q int32, n int) bool {
	return s.d.accept[q] && n >= s.min && (s.max < 0 || n <= s.max)
}

// clip is the count of characters past which it no longer matters.
func (s *strNode) clip(n int) int {
	if s.max < 0 {
		return min(n, s.min)
	}
	return n
}

// charOK reports whether some character in lo..hi may come at state q
// after n characters.
func (s *strNode) charOK(q int32, n int, lo, hi rune) bool {
	rs := s.d.trans[q]
	for i := s.d.find(q, lo); i < len(rs) && rs[i].lo <= hi; i++ {
		if s.lenOK(rs[i].to, n+1) {
			return true
		}
	}
	return false
}

// settles returns the state every character in lo..hi leads to from q,
// if one transition covers them all.
func (s *strNode) settles(q int32, lo, hi rune) (int32, bool) {
	rs := s.d.trans[q]
	if i := s.d.find(q, lo); i < len(rs) && rs[i].lo <= lo && rs[i].hi >= hi {
		return rs[i].to, true
	}
	return 0, false
}

// hasBit reports whether a bit of b in lo..hi is set.
func hasBit(b []uint64, lo, hi int) bool {
	if hi >= len(b)*64 {
		hi = len(b)*64 - 1
	}
	for lo <= hi {
		w := lo >> 6
		word := b[w] >> (lo & 63)
		span := min(hi-lo+1, 64-(lo&63))
		if span < 64 {
			word &= 1<<span - 1
		}
		if word != 0 {
			return true
		}
		lo += span
	}
	return false
}
