package jsongrammar

import "unicode/utf8"

// oneOf is honoured as anyOf where its alternatives are disjoint: no
// value can match two of them, so a value of one matches exactly one.
// The compiler proves it on the compiled alternatives (their types
// differ, their literals differ, a property both require takes disjoint
// values, their item counts or numeric ranges do not meet, their
// strings' automata do not intersect). A proof reads only what the
// compiled nodes admit as their schemas do: not a part left out, not
// an array's first items where contains shaped them, not a format's
// pattern (a validator may read the format more widely), so that no
// value of one alternative matches another by what the grammar left
// out. Where it cannot prove it, each alternative
// is compiled less the others (their negations); an alternative that
// cannot be negated is a 400 that names it, never an answer that
// matches two.

// maxDisjointDepth bounds the nesting a proof follows.
const maxDisjointDepth = 8

// exclusive reports whether oneOf's compiled alternatives are disjoint.
func (c *compiler) exclusive(alts []int32) bool {
	for i := range alts {
		for j := i + 1; j < len(alts); j++ {
			if !c.disjoint(alts[i], alts[j], 0) {
				return false
			}
		}
	}
	return true
}

// leavesOf are the nodes other than alternatives node n begins as;
// false when one is still being compiled, or was left out (partial).
func (c *compiler) leavesOf(n int32) ([]int32, bool) {
	var out []int32
	seen := map[int32]bool{}
	ok := true
	var walk func(x int32)
	walk = func(x int32) {
		if seen[x] {
			return
		}
		seen[x] = true
		nd := &c.nodes[x]
		if nd.kind != kAnyOf {
			out = append(out, x)
			return
		}
		if c.open[x] || nd.partial {
			ok = false
		}
		for _, a := range nd.alts {
			walk(a)
		}
	}
	walk(n)
	return out, ok
}

// disjoint reports whether no value is admitted by both a and b.
func (c *compiler) disjoint(a, b int32, depth int) bool {
	if depth > maxDisjointDepth {
		return false
	}
	la, ok1 := c.leavesOf(a)
	lb, ok2 := c.leavesOf(b)
	if !ok1 || !ok2 {
		return false
	}
	for _, x := range la {
		for _, y := range lb {
			c.bud.spend(1)
			if !c.disjointLeaves(x, y, depth) {
				return false
			}
		}
	}
	return true
}

func (c *compiler) disjointLeaves(x, y int32, depth int) bool {
	nx, ny := &c.nodes[x], &c.nodes[y]
	if nx.kind == kLiteral || ny.kind == kLiteral {
		if nx.kind != kLiteral {
			nx, ny = ny, nx
		}
		for _, t := range literalTexts(nx.lit) {
			if c.nodeMayAdmit(ny, t) {
				return false
			}
		}
		return true
	}
	if nx.kind != ny.kind {
		return true
	}
	switch nx.kind {
	case kString:
		if nx.partial || ny.partial {
			return false
		}
		d, ok := intersect(nx.str.d, ny.str.d, c.bud)
		return ok && d.empty() || rangesApart(nx.str.min, nx.str.smax, ny.str.min, ny.str.smax)
	case kNumber:
		return nx.spec != nil && ny.spec != nil && numbersApart(*nx.spec, *ny.spec)
	case kArray:
		ax, ay := nx.arr, ny.arr
		if rangesApart(ax.minItems, ax.smax, ay.minItems, ay.smax) {
			return true
		}
		if nx.partial || ny.partial {
			return false // its first items are contains', not the schema's
		}
		for i := range min(ax.minItems, ay.minItems) {
			if c.disjoint(ax.item(i), ay.item(i), depth+1) {
				return true
			}
		}
	case kObject:
		return c.objectsApart(nx.obj, ny.obj, depth)
	}
	return false
}

// objectsApart reports whether two objects share no value: a property
// both require takes disjoint values, or one requires a key the other
// cannot hold.
func (c *compiler) objectsApart(a, b *objNode, depth int) bool {
	for _, p := range a.props {
		if !p.required {
			continue
		}
		q := b.prop(p.name)
		if q == nil && b.closed {
			return true
		}
		if q != nil && q.required && c.disjoint(p.val, q.val, depth+1) {
			return true
		}
	}
	for _, q := range b.props {
		if q.required && a.prop(q.name) == nil && a.closed {
			return true
		}
	}
	return false
}

func (o *objNode) prop(name string) *prop {
	for i := range o.props {
		if o.props[i].name == name {
			return &o.props[i]
		}
	}
	return nil
}

// rangesApart reports whether [lo1, hi1] and [lo2, hi2] do not meet (hi
// -1: none).
func rangesApart(lo1, hi1, lo2, hi2 int) bool {
	return hi1 >= 0 && hi1 < lo2 || hi2 >= 0 && hi2 < lo1
}

// literalTexts are the texts of a literal trie.
func literalTexts(t *litTrie) []string {
	var out []string
	var walk func(n int32, prefix []byte)
	walk = func(n int32, prefix []byte) {
		if t.nodes[n].term {
			out = append(out, string(prefix))
		}
		for _, e := range t.nodes[n].edges {
			walk(e.to, append(prefix, e.b))
		}
	}
	if len(t.nodes) > 0 {
		walk(0, nil)
	}
	return out
}

// nodeMayAdmit reports whether node n may admit the value of JSON text
// t (true when it cannot tell).
func (c *compiler) nodeMayAdmit(n *node, t string) bool {
	v, err := parseDoc([]byte(t))
	if err != nil {
		return true
	}
	x := v.root
	switch n.kind {
	case kLiteral:
		for _, u := range literalTexts(n.lit) {
			w, err := parseDoc([]byte(u))
			if err != nil || sameValue(x, w.root) {
				return true
			}
		}
		return false
	case kString:
		if n.partial {
			return x.kind == jString
		}
		l := utf8.RuneCountInString(x.text)
		return x.kind == jString && n.str.d.matches(x.text) && !rangesApart(l, l, n.str.min, n.str.smax)
	case kNumber:
		return x.kind == jNumber && (n.spec == nil || numberIn(*n.spec, x.text))
	case kObject:
		return x.kind == jObject
	case kArray:
		return x.kind == jArray
	}
	return true
}
