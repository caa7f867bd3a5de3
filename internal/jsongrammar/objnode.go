package jsongrammar

import "slices"

// objNode is an object: its declared properties in the schema's order
// (required ones always, optional ones maybe), then undeclared members
// (extras), whose keys are none of the declared ones. Whether a key may
// come is decided when its first byte does: only a key whose value can
// be written, and after which the object can still be closed.
type objNode struct {
	props    []prop
	trie     keyTrie
	extras   []extra
	minProps int
	maxProps int // -1: none
	// closed: the schema admits no undeclared member.
	closed bool
	// dependentRequired: per property, the properties it requires; and
	// per property, its bit in a frame's chosen mask (-1: it plays no
	// part in a dependency).
	deps [][]int32
	bit  []int8
	// needed[i]: the first required property at index i or after
	// (len(props) if none).
	needed []int32
}

type prop struct {
	name     string
	val      int32
	required bool
}

// extra is a kind of undeclared member: its key's string node and its
// value's node.
type extra struct {
	key, val int32
}

// keyTrie holds the declared keys as JSON text after the opening quote
// (the closing one included), so a key ends at a leaf.
type keyTrie struct {
	nodes []keyNode
}

type keyNode struct {
	edges []byteEdge
	term  int32   // the property whose key ends here, -1
	props []int32 // the properties whose keys pass here, sorted
}

func newKeyTrie(props []prop) keyTrie {
	t := keyTrie{nodes: []keyNode{{term: -1}}}
	for j, p := range props {
		lit := jsonString(p.name)[1:]
		cur := int32(0)
		t.nodes[0].props = append(t.nodes[0].props, int32(j))
		for i := 0; i < len(lit); i++ {
			next := t.child(cur, lit[i])
			if next < 0 {
				next = int32(len(t.nodes))
				t.nodes = append(t.nodes, keyNode{term: -1})
				edges := t.nodes[cur].edges
				k, _ := slices.BinarySearchFunc(edges, lit[i], func(e byteEdge, b byte) int { return int(e.b) - int(b) })
				t.nodes[cur].edges = slices.Insert(edges, k, byteEdge{lit[i], next})
			}
			cur = next
			t.nodes[cur].props = append(t.nodes[cur].props, int32(j))
		}
		t.nodes[cur].term = int32(j)
	}
	return t
}

func (t *keyTrie) child(n int32, b byte) int32 { return childOf(t.nodes[n].edges, b) }

// firstNeeded is the first property at pos or after that must come:
// required, or required by a property chosen.
func (o *objNode) firstNeeded(pos, chosen int32) int32 {
	n := int32(len(o.props))
	if pos >= n {
		return n
	}
	first := o.needed[pos]
	if chosen != 0 {
		for k, b := range o.bit {
			if b < 0 || chosen&(1<<b) == 0 {
				continue
			}
			for _, r := range o.deps[k] {
				if r >= pos && r < first {
					first = r
				}
			}
		}
	}
	return first
}

// neededAfter counts the properties from pos that must come once
// chosen is.
func (o *objNode) neededAfter(pos, chosen int32) int {
	n := 0
	for j := pos; j < int32(len(o.props)); j++ {
		if o.props[j].required || o.obligated(j, chosen) {
			n++
		}
	}
	return n
}

func (o *objNode) obligated(j, chosen int32) bool {
	if chosen == 0 {
		return false
	}
	for k, b := range o.bit {
		if b >= 0 && chosen&(1<<b) != 0 && slices.Contains(o.deps[k], j) {
			return true
		}
	}
	return false
}

// choose is the chosen mask once property j is.
func (o *objNode) choose(j, chosen int32) int32 {
	if b := o.bit[j]; b >= 0 {
		return chosen | 1<<b
	}
	return chosen
}

// propOK reports whether property j may come next, at position pos after
// count members, its value at frame depth d.
func (g *Grammar) propOK(o *objNode, j, pos, count, chosen, d int32) bool {
	if j < pos || j > o.firstNeeded(pos, chosen) || !g.fits(o.props[j].val, d) {
		return false
	}
	for _, r := range o.deps[j] {
		if r < j && (o.bit[r] < 0 || chosen&(1<<o.bit[r]) == 0) {
			return false // it needs a property already passed over
		}
		if r > j && !g.fits(o.props[r].val, d) {
			return false // it needs one that cannot come
		}
	}
	next := o.choose(j, chosen)
	if o.maxProps >= 0 && int(count)+1+o.neededAfter(j+1, next) > o.maxProps {
		return false
	}
	if o.minProps > 0 && int(count)+1 < o.minProps && !g.extrasFit(o, d) {
		// Enough properties must still fit after it.
		more := 0
		for k := j + 1; k < int32(len(o.props)) && int(count)+1+more < o.minProps; k++ {
			if g.fits(o.props[k].val, d) {
				more++
			}
		}
		if int(count)+1+more < o.minProps {
			return false
		}
	}
	return true
}

// extrasFit reports whether undeclared members may come at depth d.
func (g *Grammar) extrasFit(o *objNode, d int32) bool {
	for _, x := range o.extras {
		if g.fits(x.key, d) && g.fits(x.val, d) {
			return true
		}
	}
	return false
}

// extraOK reports whether undeclared member kind x may come next.
func (g *Grammar) extraOK(o *objNode, x, pos, count, chosen, d int32) bool {
	e := o.extras[x]
	return o.firstNeeded(pos, chosen) == int32(len(o.props)) &&
		(o.maxProps < 0 || int(count) < o.maxProps) &&
		g.fits(e.key, d) && g.fits(e.val, d)
}

// closeOK reports whether the object may end at pos after count members.
func (o *objNode) closeOK(pos, count, chosen int32) bool {
	return o.firstNeeded(pos, chosen) == int32(len(o.props)) && int(count) >= o.minProps
}

// moreOK reports whether another member may come at pos after count
// members (a comma commits to one).
func (g *Grammar) moreOK(o *objNode, pos, count, chosen, d int32) bool {
	for j := pos; j < int32(len(o.props)); j++ {
		if g.propOK(o, j, pos, count, chosen, d) {
			return true
		}
		if j >= o.firstNeeded(pos, chosen) {
			break
		}
	}
	for x := range o.extras {
		if g.extraOK(o, int32(x), pos, count, chosen, d) {
			return true
		}
	}
	return false
}

// keyOK reports whether the declared keys under trie node t leave a
// property that may come.
func (g *Grammar) keyOK(o *objNode, t, pos, count, chosen, d int32) bool {
	props := o.trie.nodes[t].props
	i, _ := slices.BinarySearch(props, pos)
	last := o.firstNeeded(pos, chosen)
	for ; i < len(props) && props[i] <= last; i++ {
		if g.propOK(o, props[i], pos, count, chosen, d) {
			return true
		}
	}
	return false
}
