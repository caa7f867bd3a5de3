package jsongrammar

import (
	"encoding/binary"
	"slices"
)

// A State's parses share their stacks: a graph-structured stack, as a
// GLR parser keeps it. A gnode is a frame on top of a set of stacks (its
// parents, one level down); gnodes are interned, so that a frame over
// the same parents is one node however many ways it was reached. Two
// parses at the same frame and depth merge into one node over the union
// of their parents: the parses an ambiguous schema keeps at once grow
// with the frames that differ, not with the ways to reach them (ten
// alternatives nested nine deep that all lead to one string are one
// parse, not 10^9).

// frame is one level of a parse: a node, and where in it.
type frame struct {
	n          int32
	st         uint8
	a, b, c, d int32
}

func (f frame) compare(g frame) int {
	switch {
	case f.n != g.n:
		return cmpInt(int(f.n), int(g.n))
	case f.st != g.st:
		return cmpInt(int(f.st), int(g.st))
	case f.a != g.a:
		return cmpInt(int(f.a), int(g.a))
	case f.b != g.b:
		return cmpInt(int(f.b), int(g.b))
	case f.c != g.c:
		return cmpInt(int(f.c), int(g.c))
	}
	return cmpInt(int(f.d), int(g.d))
}

// gnode is a frame at a depth (the bottom's is 0) over its parents,
// which are one level down, have distinct frames, and are sorted by
// them.
type gnode struct {
	f     frame
	depth int32
	up    []*gnode
	id    uint64
}

func compareNodes(x, y *gnode) int {
	if x.depth != y.depth {
		return cmpInt(int(x.depth), int(y.depth))
	}
	return x.f.compare(y.f)
}

// gss interns the gnodes of an automaton.
type gss struct {
	nodes  map[string]*gnode
	nextID uint64
	buf    []byte
}

func (s *gss) intern(f frame, depth int32, up []*gnode) *gnode {
	b := s.buf[:0]
	b = binary.AppendVarint(b, int64(f.n))
	b = append(b, f.st)
	for _, x := range []int32{f.a, f.b, f.c, f.d, depth} {
		b = binary.AppendVarint(b, int64(x))
	}
	for _, p := range up {
		b = binary.AppendUvarint(b, p.id)
	}
	s.buf = b
	if n := s.nodes[string(b)]; n != nil {
		return n
	}
	s.nextID++
	n := &gnode{f: f, depth: depth, up: up, id: s.nextID}
	s.nodes[string(b)] = n
	return n
}

// merge is the canonical list of the parents ups: sorted, nodes of one
// frame merged, at most MaxTops.
func (s *gss) merge(ups []*gnode) []*gnode {
	if len(ups) <= 1 {
		return ups
	}
	ups = slices.Clone(ups)
	slices.SortFunc(ups, func(x, y *gnode) int {
		if c := compareNodes(x, y); c != 0 {
			return c
		}
		return cmpInt(int(x.id), int(y.id))
	})
	out := ups[:0]
	for i := 0; i < len(ups); {
		j := i + 1
		for j < len(ups) && compareNodes(ups[i], ups[j]) == 0 {
			j++
		}
		n := ups[i]
		if j-i > 1 && ups[j-1] != n {
			var all []*gnode
			for _, x := range ups[i:j] {
				all = append(all, x.up...)
			}
			n = s.intern(n.f, n.depth, s.merge(all))
		}
		out = append(out, n)
		i = j
	}
	if len(out) > MaxTops {
		out = out[:MaxTops]
	}
	return out
}

// topSet gathers the parses a transition makes.
type topSet struct {
	at   map[topKey]int
	ents []topEntry
}

type topKey struct {
	f     frame
	depth int32
}

type topEntry struct {
	k   topKey
	ups []*gnode
}

func (t *topSet) reset() {
	clear(t.at)
	t.ents = t.ents[:0]
}

// add makes frame f at depth a top over ups.
func (t *topSet) add(f frame, depth int32, ups []*gnode) {
	k := topKey{f, depth}
	i, ok := t.at[k]
	if !ok {
		i = len(t.ents)
		t.at[k] = i
		t.ents = append(t.ents, topEntry{k: k})
	}
	t.ents[i].ups = append(t.ents[i].ups, ups...)
}

// tops interns the gathered parses, sorted, at most MaxTops.
func (t *topSet) tops(s *gss) []*gnode {
	out := make([]*gnode, 0, len(t.ents))
	for _, e := range t.ents {
		out = append(out, s.intern(e.k.f, e.k.depth, s.merge(e.ups)))
	}
	slices.SortFunc(out, compareNodes)
	if len(out) > MaxTops {
		out = out[:MaxTops]
	}
	return out
}
