package jsongrammar

import (
	"fmt"
	"slices"
)

// kind is what a node generates.
type kind uint8

const (
	kEnd     kind = iota // the bottom of every stack: nothing more
	kAnyOf               // one of alts
	kObject              // declared properties in order, then undeclared keys
	kArray               // items, between minItems and maxItems
	kString              // a string of a character automaton
	kNumber              // a number of a byte automaton
	kLiteral             // one of a set of JSON texts
)

type node struct {
	kind kind
	alts []int32 // anyOf
	obj  *objNode
	arr  *arrNode
	str  *strNode
	num  *bdfa
	lit  *litTrie
	// spec is what a number node's automaton was built from, for the
	// proofs that oneOf's alternatives are disjoint.
	spec *numSpec
	// partial: the node admits fewer values than its schema (a part
	// left out, contains read as the first items, a format's pattern
	// narrower than a validator's reading of it), so that those proofs
	// do not read its values as the schema's.
	partial bool
}

// Bounds are what a grammar generates beyond its schema's bounds, so
// that a model that never closes a value ends: a string without
// maxLength has at most String characters, an array without maxItems at
// most Items items, an object at most Items undeclared members, and
// containers nest at most Depth deep. A bound never overrides what the
// schema requires (a minLength above String is honoured). Zero: none.
type Bounds struct {
	String, Items, Depth int
}

// BuiltinBounds are the bounds the built-in engine generates under: its
// model's weights are random, and would otherwise not close a string or
// an array before max_tokens. A router checks a schema for the built-in
// engine under them, so that it compiles there as it did at admission.
func BuiltinBounds() Bounds { return Bounds{String: 24, Items: 4, Depth: 4} }

// Grammar is a compiled schema. It is immutable and safe to share.
type Grammar struct {
	nodes []node
	root  int32
	// Key identifies the grammar: equal keys, equal grammars.
	Key    string
	bounds Bounds
	// Per node: the nodes other than alternatives that a value of it
	// begins as, and the least nesting of containers a value of it
	// needs (noDepth: it has no value).
	leaves   [][]int32
	minDepth []int32
	// maxDepth is the most containers a value nests.
	maxDepth int32
}

// noDepth is the minDepth of a node without a value.
const noDepth = 1 << 30

// MaxAlternatives bounds the nodes one value may begin as (an anyOf's
// alternatives, through references and nested anyOf).
const MaxAlternatives = 256

// analyze computes the grammar's leaves and depths; an error when the
// root admits no value within MaxStackDepth, or an alternative has too
// many leaves.
func (g *Grammar) analyze(bud *budget) error {
	n := len(g.nodes)
	g.leaves = make([][]int32, n)
	for i := range g.nodes {
		if g.nodes[i].kind != kAnyOf {
			g.leaves[i] = []int32{int32(i)}
			continue
		}
		seen := map[int32]bool{}
		var out []int32
		var walk func(x int32)
		walk = func(x int32) {
			if seen[x] {
				return
			}
			seen[x] = true
			bud.spend(1)
			if g.nodes[x].kind != kAnyOf {
				out = append(out, x)
				return
			}
			for _, a := range g.nodes[x].alts {
				walk(a)
			}
		}
		walk(int32(i))
		if len(out) > MaxAlternatives {
			return &SchemaError{Bound: "MaxAlternatives", Msg: fmt.Sprintf("a value may begin as more than %d alternatives (MaxAlternatives)", MaxAlternatives)}
		}
		g.leaves[i] = out
		if !bud.spend(len(out)) {
			return budgetError()
		}
	}
	g.minDepth = make([]int32, n)
	for i := range g.minDepth {
		g.minDepth[i] = noDepth
	}
	for changed := true; changed; {
		changed = false
		for i := range g.nodes {
			if d := g.depthOf(int32(i)); d < g.minDepth[i] {
				g.minDepth[i], changed = d, true
			}
		}
		if !bud.spend(n) {
			return budgetError()
		}
	}
	need := g.minDepth[g.root]
	if need >= noDepth {
		return &SchemaError{Msg: "admits no value (a contradiction, or a required recursion without end)"}
	}
	if need > MaxStackDepth {
		return &SchemaError{Bound: "MaxStackDepth", Msg: fmt.Sprintf("its values nest more than %d deep (MaxStackDepth)", MaxStackDepth)}
	}
	g.maxDepth = MaxStackDepth
	if g.bounds.Depth > 0 {
		g.maxDepth = max(int32(g.bounds.Depth), need)
	}
	return nil
}

// depthOf is the least nesting of a value of node i, from its
// children's current figures.
func (g *Grammar) depthOf(i int32) int32 {
	nd := &g.nodes[i]
	switch nd.kind {
	case kEnd:
		return 0
	case kAnyOf:
		d := int32(noDepth)
		for _, a := range nd.alts {
			d = min(d, g.minDepth[a])
		}
		return d
	case kString:
		if nd.str.d.empty() {
			return noDepth
		}
	case kNumber:
		if nd.num == nil {
			return noDepth
		}
	case kLiteral:
		if len(nd.lit.nodes) == 0 {
			return noDepth
		}
	case kObject:
		return g.objectDepth(nd.obj)
	case kArray:
		a := nd.arr
		d := int32(0)
		for i := range min(a.minItems, len(a.prefix)) {
			d = max(d, g.minDepth[a.prefix[i]])
		}
		if a.minItems > len(a.prefix) {
			if a.items < 0 {
				return noDepth
			}
			d = max(d, g.minDepth[a.items])
		}
		return min(noDepth, d+1)
	}
	return 0
}

// objectDepth is the least nesting of an object: its required members',
// and, for minProperties, the shallowest others (its undeclared members
// where it may have any).
func (g *Grammar) objectDepth(o *objNode) int32 {
	d := int32(0)
	var optional []int32
	nreq := 0
	for j, p := range o.props {
		switch {
		case p.required:
			d = max(d, g.minDepth[p.val])
			for _, r := range o.deps[j] {
				d = max(d, g.minDepth[o.props[r].val]) // what it requires too
			}
			nreq++
		case g.minDepth[p.val] < noDepth:
			optional = append(optional, g.minDepth[p.val])
		}
	}
	if more := o.minProps - nreq; more > 0 {
		if x := g.minExtraDepth(o); x < noDepth {
			d = max(d, x) // undeclared members, as many as needed
		} else if more > len(optional) {
			return noDepth
		} else {
			slices.Sort(optional)
			d = max(d, optional[more-1])
		}
	}
	return min(noDepth, d+1)
}

// minExtraDepth is the least nesting of an undeclared member's value.
func (g *Grammar) minExtraDepth(o *objNode) int32 {
	d := int32(noDepth)
	for _, x := range o.extras {
		d = min(d, max(g.minDepth[x.key], g.minDepth[x.val]))
	}
	return d
}

// fits reports whether a value of node n may begin at frame depth d
// (the root's is 1): its least nesting fits under the grammar's.
func (g *Grammar) fits(n int32, d int32) bool {
	return d-1+g.minDepth[n] <= g.maxDepth
}

// litTrie is a set of JSON texts as a byte trie; node 0 is the root.
type litTrie struct {
	nodes []litNode
}

type litNode struct {
	edges []byteEdge
	term  bool   // a text ends here
	index int32  // the text's index, at its end
	below uint32 // the texts at or below (of the first 32)
}

type byteEdge struct {
	b  byte
	to int32
}

func (t *litTrie) child(n int32, b byte) int32 { return childOf(t.nodes[n].edges, b) }

// childOf is where the edge of byte b leads, -1 for none.
func childOf(edges []byteEdge, b byte) int32 {
	for _, e := range edges {
		if e.b == b {
			return e.to
		}
	}
	return -1
}

func newLitTrie(texts []string) *litTrie {
	t := &litTrie{nodes: []litNode{{}}}
	for k, s := range texts {
		cur := int32(0)
		for i := 0; i < len(s); i++ {
			next := t.child(cur, s[i])
			if next < 0 {
				next = int32(len(t.nodes))
				t.nodes = append(t.nodes, litNode{})
				edges := t.nodes[cur].edges
				j, _ := slices.BinarySearchFunc(edges, s[i], func(e byteEdge, b byte) int { return int(e.b) - int(b) })
				t.nodes[cur].edges = slices.Insert(edges, j, byteEdge{s[i], next})
			}
			cur = next
		}
		t.nodes[cur].term = true
		t.nodes[cur].index = int32(k)
	}
	for i, s := range texts {
		if i >= 32 {
			break
		}
		cur := int32(0)
		t.nodes[0].below |= 1 << i
		for j := 0; j < len(s); j++ {
			cur = t.child(cur, s[j])
			t.nodes[cur].below |= 1 << i
		}
	}
	if len(texts) == 0 {
		t.nodes = nil
	}
	return t
}

// count is the number of texts.
func (t *litTrie) count() int {
	n := 0
	for _, nd := range t.nodes {
		if nd.term {
			n++
		}
	}
	return n
}

// arrNode is an array: its items by position (prefix), then items.
type arrNode struct {
	prefix   []int32
	items    int32 // -1: no item past the prefix
	minItems int
	maxItems int // -1: none; the generation bound folded in
	smax     int // the schema's maxItems (-1: none)
	unique   bool
	// lit, for an array under uniqueItems whose items are one set of at
	// most maxUniqueLiterals literals: read in the array's own frame,
	// each at most once.
	lit *litTrie
}

// item is the node of the item at index i, -1 for none.
func (a *arrNode) item(i int) int32 {
	if i < len(a.prefix) {
		return a.prefix[i]
	}
	return a.items
}
