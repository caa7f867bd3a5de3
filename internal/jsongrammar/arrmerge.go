package jsongrammar

import (
	"slices"
	"strings"
)

// An array of a conjunction: its items by position (prefixItems, or
// draft 4's items as a list), then the rest (items, additionalItems),
// each the conjunction of what every part says of that position; the
// first minContains of them also contains' schema (contains is honoured
// as "the first items"; maxContains is refused).

// arrPart is what one part of a conjunction says of an array's items.
type arrPart struct {
	s      *jv
	prefix []*jv
	rest   *jv // the schema of the items past the prefix (nil: any)
	closed bool
}

// conjOrAny compiles parts, any value when there are none.
func (c *compiler) conjOrAny(parts []celem) (int32, error) {
	if len(parts) == 0 {
		return c.any(), nil
	}
	return c.conj(parts)
}

// value compiles the conjunction of a part of a value (a property's, an
// item's): one it cannot serve (a keyword refused, a reference outside
// the schema) has no value, so the part is never written: an optional
// property is left out, an alternative not taken, an array without such
// items. Only where the value needs it does the schema fail, with the
// first such error (see finish). Past a bound, the error stands.
func (c *compiler) value(parts []celem) (int32, error) {
	return c.prune(c.conjOrAny(parts))
}

// prune is n, err with a refusal (not a bound) turned into no value.
func (c *compiler) prune(n int32, err error) (int32, error) {
	se, ok := err.(*SchemaError)
	if !ok || se.Bound != "" {
		return n, err
	}
	if c.pruned == nil {
		c.pruned = se
	}
	n = c.none()
	c.nodes[n].partial = true
	return n, nil
}

// arrParts reads the item keywords of each part of set.
func arrParts(set []celem) []arrPart {
	var out []arrPart
	for i, e := range set {
		s := e.s
		p := arrPart{s: s}
		it := s.get("items")
		switch {
		case s.get("prefixItems") != nil:
			p.prefix, p.rest = s.get("prefixItems").arrOf(), it
		case it != nil && it.kind == jArray:
			p.prefix, p.rest = it.arr, s.get("additionalItems")
		default:
			p.rest = it
		}
		if p.rest == nil {
			if u := s.get("unevaluatedItems"); u != nil {
				// Past what the part's subtree evaluates.
				evaluates := false
				for j := range set {
					if derives(set, j, i) {
						q := set[j].s
						n := len(q.get("prefixItems").arrOf())
						switch it := q.get("items"); {
						case it != nil && it.kind == jArray:
							n = len(it.arr)
							evaluates = evaluates || q.get("additionalItems") != nil
						case it != nil:
							evaluates = true
						}
						for len(p.prefix) < n {
							p.prefix = append(p.prefix, &jv{kind: jBool, b: true, id: -1})
						}
					}
				}
				if !evaluates {
					p.rest = u
				}
			}
		}
		p.closed = p.rest != nil && p.rest.kind == jBool && !p.rest.b
		if p.prefix != nil || p.rest != nil {
			out = append(out, p)
		}
	}
	return out
}

// array compiles the array of a conjunction.
func (c *compiler) array(set []celem) (int32, error) {
	a := &arrNode{items: -1, maxItems: -1}
	var contains []celem
	minContains := 0
	for _, e := range set {
		s := e.s
		if err := lengths(s, "minItems", "maxItems", &a.minItems, &a.maxItems); err != nil {
			return 0, err
		}
		if u := s.get("uniqueItems"); u != nil && u.kind == jBool && u.b {
			a.unique = true
		}
		if x := s.get("contains"); x != nil {
			if s.get("maxContains") != nil {
				return 0, kwErr(s, "maxContains", "is not served (contains is honoured as its first items)")
			}
			n, ok, err := counts(s, "minContains")
			if err != nil {
				return 0, err
			}
			if !ok {
				n = 1
			}
			if n > 0 {
				contains = append(contains, whole(x))
				minContains = max(minContains, n)
			}
		}
	}
	parts := arrParts(set)
	n := minContains
	for _, p := range parts {
		n = max(n, len(p.prefix))
		if p.closed && (a.maxItems < 0 || len(p.prefix) < a.maxItems) {
			a.maxItems = len(p.prefix)
		}
	}
	if a.maxItems >= 0 {
		n = min(n, a.maxItems)
	}
	a.minItems = max(a.minItems, minContains)
	for i := range n {
		var pp []celem
		for _, p := range parts {
			switch {
			case i < len(p.prefix):
				pp = append(pp, whole(p.prefix[i]))
			case p.rest != nil && !p.closed:
				pp = append(pp, whole(p.rest))
			}
		}
		if i < minContains {
			pp = append(pp, contains...)
		}
		it, err := c.value(pp)
		if err != nil {
			return 0, err
		}
		a.prefix = append(a.prefix, it)
	}
	if a.maxItems < 0 || a.maxItems > n {
		var rest []celem
		for _, p := range parts {
			if p.rest != nil {
				rest = append(rest, whole(p.rest))
			}
		}
		it, err := c.value(rest)
		if err != nil {
			return 0, err
		}
		a.items = it
	}
	a.smax = a.maxItems
	if a.maxItems < 0 && c.bounds.Items > 0 {
		a.maxItems = max(c.bounds.Items, a.minItems, len(a.prefix))
	}
	if a.unique {
		c.uniqueLiterals(a)
	}
	if a.maxItems >= 0 && a.maxItems < a.minItems {
		return c.none(), nil
	}
	return c.add(node{kind: kArray, arr: a, partial: len(contains) > 0}), nil
}

// maxUniqueLiterals bounds the literals whose uniqueness an array frame
// tracks itself (a bit each).
const maxUniqueLiterals = 30

// uniqueLiterals makes an array under uniqueItems whose items are of
// a small finite set (an enum, booleans, a small range of integers, a
// pattern of few strings) write each once: its frame tracks the values
// used, so that no item begins that could only end as a repeat. Other
// arrays under uniqueItems are the engine's (Distinct).
func (c *compiler) uniqueLiterals(a *arrNode) {
	if a.items < 0 {
		return
	}
	leaves, ok := c.leavesOf(a.items)
	if !ok {
		return
	}
	texts, ok := c.enumerateAll(leaves, maxUniqueLiterals+1, 0)
	if !ok {
		return
	}
	// Items by position (prefixItems, contains) are read alike only
	// where each position admits the same literals as the rest.
	for _, p := range a.prefix {
		pl, ok := c.leavesOf(p)
		if !ok {
			return
		}
		pt, ok := c.enumerateAll(pl, maxUniqueLiterals+1, 0)
		if !ok || !sameTexts(pt, texts) {
			return
		}
	}
	if len(texts) == 0 {
		a.maxItems = 0 // the items have no value
		return
	}
	lit := newLitTrie(texts)
	n := lit.count()
	if n != len(texts) || n > maxUniqueLiterals {
		return // a text twice (two leaves share values), or too many
	}
	a.lit = lit
	if a.maxItems < 0 || a.maxItems > n {
		a.maxItems = n
	}
}

// sameTexts reports whether a and b hold the same texts.
func sameTexts(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// enumerateAll returns the texts of the values of nodes, one per value
// (the first text of each), when there are at most most; false
// otherwise.
func (c *compiler) enumerateAll(nodes []int32, most, depth int) ([]string, bool) {
	var out []string
	seen := map[string]bool{}
	for _, n := range nodes {
		texts, ok := c.enumerate(n, most-len(out), depth)
		if !ok {
			return nil, false
		}
		for _, t := range texts {
			doc, err := parseDoc([]byte(t))
			if err != nil {
				return nil, false
			}
			if k := canonicalValue(doc.root); !seen[k] {
				seen[k] = true
				out = append(out, t)
			}
		}
		if len(out) > most {
			return nil, false
		}
	}
	return out, true
}

// maxEnumerateDepth bounds the nesting enumerate follows.
const maxEnumerateDepth = 4

// enumerate returns the texts node n writes when they are at most most
// (a text written one way: an integer without a fraction, a string
// without escapes, an object of its properties in order); false
// otherwise.
func (c *compiler) enumerate(n int32, most, depth int) ([]string, bool) {
	nd := &c.nodes[n]
	var out []string
	ok := true
	switch {
	case depth > maxEnumerateDepth || !c.bud.spend(1):
		return nil, false
	case nd.kind == kAnyOf:
		leaves, ok := c.leavesOf(n)
		if !ok {
			return nil, false
		}
		return c.enumerateAll(leaves, most, depth)
	case nd.kind == kLiteral:
		for _, t := range literalTexts(nd.lit) {
			if t != "" && (t[0] == '-' || isDigit(t[0])) && strings.ContainsAny(t, ".eE") {
				return nil, false // a number other texts write too
			}
			out = append(out, t)
		}
	case nd.kind == kNumber:
		if nd.num != nil {
			ok = enumerateNumber(nd.num, 0, nil, most, &out)
		}
	case nd.kind == kString:
		ok = nd.str.max >= 0 && enumerateString(nd.str, 0, nil, most, &out)
	case nd.kind == kArray:
		out, ok = c.enumerateArray(nd.arr, most, depth)
	case nd.kind == kObject:
		out, ok = c.enumerateObject(nd.obj, most, depth)
	}
	return out, ok && len(out) <= most
}

// enumerateArray is enumerate of an array: each count of items, each
// item each of its texts.
func (c *compiler) enumerateArray(a *arrNode, most, depth int) ([]string, bool) {
	if a.maxItems < 0 || a.unique && a.lit == nil {
		return nil, false
	}
	var out []string
	var build func(i int, prefix string, used map[string]bool) bool
	build = func(i int, prefix string, used map[string]bool) bool {
		if i >= a.minItems {
			out = append(out, prefix+"]")
		}
		if len(out) > most {
			return false
		}
		if i == a.maxItems || a.item(i) < 0 {
			return true
		}
		texts, ok := c.enumerate(a.item(i), most, depth+1)
		if a.lit != nil {
			texts, ok = literalTexts(a.lit), true // its own literals, each once
		}
		if !ok {
			return false
		}
		sep := ","
		if i == 0 {
			sep = ""
		}
		for _, t := range texts {
			if used[t] {
				continue
			}
			if a.lit != nil {
				used[t] = true
			}
			if !build(i+1, prefix+sep+t, used) {
				return false
			}
			delete(used, t)
		}
		return true
	}
	if !build(0, "[", map[string]bool{}) {
		return nil, false
	}
	return out, true
}

// enumerateObject is enumerate of an object of declared properties:
// each subset its rules allow, each value each of its texts.
func (c *compiler) enumerateObject(o *objNode, most, depth int) ([]string, bool) {
	if len(o.extras) > 0 || o.minProps > 0 || o.maxProps >= 0 {
		return nil, false
	}
	for _, d := range o.deps {
		if len(d) > 0 {
			return nil, false
		}
	}
	var out []string
	var build func(j int, prefix string, first bool) bool
	build = func(j int, prefix string, first bool) bool {
		if len(out) > most {
			return false
		}
		if j == len(o.props) {
			out = append(out, prefix+"}")
			return true
		}
		p := o.props[j]
		if !p.required && !build(j+1, prefix, first) {
			return false
		}
		texts, ok := c.enumerate(p.val, most, depth+1)
		if !ok {
			return false
		}
		sep := ","
		if first {
			sep = ""
		}
		for _, t := range texts {
			if !build(j+1, prefix+sep+jsonString(p.name)+":"+t, false) {
				return false
			}
		}
		return true
	}
	if !build(0, "{", true) {
		return nil, false
	}
	return out, true
}

// enumerateNumber adds the integers of d from state q after prefix to
// out; false past most, or at a fraction or exponent.
func enumerateNumber(d *bdfa, q int32, prefix []byte, most int, out *[]string) bool {
	if len(*out) > most || len(prefix) > MaxDigits+1 {
		return false
	}
	if d.accept[q] {
		*out = append(*out, string(prefix))
	}
	for cl, to := range d.next[q] {
		switch {
		case to < 0:
		case cl == ncMinus:
			if !enumerateNumber(d, to, append(prefix, '-'), most, out) {
				return false
			}
		case cl >= 10:
			return false
		default:
			if !enumerateNumber(d, to, append(prefix, byte('0'+cl)), most, out) {
				return false
			}
		}
	}
	return true
}

// enumerateString adds the strings of s from state q after prefix to
// out, as JSON text; false past most, or at a character JSON escapes.
func enumerateString(s *strNode, q int32, prefix []rune, most int, out *[]string) bool {
	if len(*out) > most || len(prefix) > s.max {
		return false
	}
	if s.closeOK(q, len(prefix)) {
		*out = append(*out, jsonString(string(prefix)))
	}
	for _, r := range s.d.trans[q] {
		if !s.lenOK(r.to, len(prefix)+1) {
			continue
		}
		if int(r.hi-r.lo) >= most {
			return false
		}
		for x := r.lo; x <= r.hi; x++ {
			if x < 0x20 || x == '"' || x == '\\' || !enumerateString(s, r.to, append(prefix, x), most, out) {
				return false
			}
		}
	}
	return true
}
