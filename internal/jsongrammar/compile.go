package jsongrammar

import (
	"fmt"
	"slices"
	"strconv"
)

// A schema compiles as conjunctions: the subschemas a value must satisfy
// at once (a schema with its allOf, its $ref and their targets, the
// alternative of an anyOf chosen). A conjunction is compiled once, so a
// schema referenced from many places, or recursively, is one node.
// Alternatives are distributed over the rest: {A, anyOf: [B, C]} is
// anyOf [A∧B, A∧C]. A conjunction without alternatives merges its
// keywords (the properties of every part, the intersection of their
// types, the tightest bounds) into nodes, one per type it admits.

// celem is an element of a conjunction: a schema, less the alternatives
// already taken apart.
type celem struct {
	s    *jv
	skip uint8
	// from is the index of the element that brought it in (its $ref,
	// allOf or alternative), -1 for none: a reference back to one of
	// them is a cycle without a value between.
	from int32
}

// whole is schema s as an element of its own.
func whole(s *jv) celem { return celem{s: s, from: -1} }

const (
	skipAnyOf uint8 = 1 << iota
	skipOneOf
	skipIf
)

type compiler struct {
	d      *doc
	bounds Bounds
	bud    *budget
	nodes  []node
	memo   map[string]int32
	open   map[int32]bool // conjunctions being compiled
	// failed are the refusals of conjunctions that did not compile, so
	// that meeting one again is the same refusal, not its placeholder.
	failed map[string]error
	lits   int
	// Shared nodes, -1 until needed.
	anyVal, anyStr int32
	numbers        map[numSpec]int32
	patterns       map[string]*cdfa
	// Schemas the compiler writes: negations and dependentSchemas' ifs,
	// once each, with ids past the document's.
	negations map[int32]*jv
	negFailed map[int32]error
	negLog    []int32 // negations in the order written
	depIfs    map[string]*jv
	synthID   int32
	negating  int // negations being written
	// pruned is the first refusal of a part left out (see value).
	pruned *SchemaError
}

// CompileSchema compiles a JSON schema into the grammar of its values,
// generated within b.
func CompileSchema(schema []byte, b Bounds) (*Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, &SchemaError{Bound: "MaxSchemaBytes", Msg: fmt.Sprintf("is %d bytes, more than %d (MaxSchemaBytes)", len(schema), MaxSchemaBytes)}
	}
	d, err := parseDoc(schema)
	if err != nil {
		return nil, &SchemaError{Msg: err.Error()}
	}
	c := newCompiler(d, b)
	root, err := c.conj([]celem{whole(d.root)})
	if err != nil {
		return nil, err
	}
	return c.finish(root, "schema:"+d.root.json())
}

func newCompiler(d *doc, b Bounds) *compiler {
	c := &compiler{d: d, bounds: b, bud: &budget{left: MaxCompileSteps}, memo: map[string]int32{}, open: map[int32]bool{}, failed: map[string]error{},
		anyVal: -1, anyStr: -1, numbers: map[numSpec]int32{}, patterns: map[string]*cdfa{},
		negations: map[int32]*jv{}, negFailed: map[int32]error{}, depIfs: map[string]*jv{}, synthID: 1 << 29}
	c.add(node{kind: kEnd})
	return c
}

// JSONObject returns the grammar of any JSON object (OpenAI's
// json_object mode without a schema), generated within b.
func JSONObject(b Bounds) *Grammar {
	c := newCompiler(&doc{}, b)
	c.any()
	root := c.add(node{kind: kObject, obj: c.freeObject(c.anyVal)})
	g, err := c.finish(root, "json_object")
	if err != nil {
		panic("jsongrammar: the json_object grammar does not compile: " + err.Error())
	}
	return g
}

func (c *compiler) finish(root int32, key string) (*Grammar, error) {
	g := &Grammar{nodes: c.nodes, root: root, bounds: c.bounds,
		Key: BoundedKey(key, c.bounds)}
	if err := g.analyze(c.bud); err != nil {
		if se, ok := err.(*SchemaError); ok && se.Bound == "" && c.pruned != nil {
			return nil, c.pruned // the value needed a part refused
		}
		return nil, err
	}
	if c.bud.left < 0 {
		return nil, budgetError()
	}
	return g, nil
}

// BoundedKey is the Key of the grammar of key (a schema's "schema:"
// followed by its compact text, or "json_object") generated within b.
func BoundedKey(key string, b Bounds) string {
	return fmt.Sprintf("%s bounded:%d,%d,%d", key, b.String, b.Items, b.Depth)
}

func (c *compiler) add(n node) int32 {
	c.nodes = append(c.nodes, n)
	return int32(len(c.nodes) - 1)
}

// kwErr is an error at keyword kw of schema s; it names the bound of a
// boundError among args.
func kwErr(s *jv, kw, format string, args ...any) error {
	se := &SchemaError{Keyword: kw, Path: s.ptr + "/" + kw, Msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if b, ok := a.(*boundError); ok {
			se.Bound = b.bound
		}
	}
	return se
}

// none is a node without a value.
func (c *compiler) none() int32 { return c.add(node{kind: kAnyOf}) }

// conj compiles the conjunction of es.
func (c *compiler) conj(es []celem) (int32, error) {
	if !c.bud.spend(len(es)) {
		return 0, budgetError()
	}
	if len(c.nodes) > MaxNodes {
		return 0, &SchemaError{Bound: "MaxNodes", Msg: fmt.Sprintf("compiles to more than %d nodes (MaxNodes)", MaxNodes)}
	}
	set, ok, err := c.flatten(es)
	if err != nil {
		return 0, err
	}
	if !ok {
		return c.none(), nil
	}
	key := conjKey(set)
	if err := c.failed[key]; err != nil {
		return 0, err
	}
	if n, ok := c.memo[key]; ok {
		return n, nil
	}
	id := c.none()
	c.memo[key] = id
	c.open[id] = true
	alts, err := c.expand(set)
	if err != nil {
		// The placeholder stays open: a node that reached it while it
		// was compiled is proved disjoint from nothing.
		delete(c.memo, key)
		c.failed[key] = err
		return 0, err
	}
	delete(c.open, id)
	c.nodes[id].alts = alts
	return id, nil
}

// conjKey identifies a conjunction by what constrains in it: what
// constrains nothing more (true, {}, a $ref or allOf already followed,
// alternatives already taken apart) is left out, so that a conjunction
// reached through other references or alternatives is the same one.
func conjKey(set []celem) string {
	var ids []int64
	for _, e := range set {
		if e.s.kind == jObject && !inert(e) {
			ids = append(ids, int64(e.s.id)<<8|int64(e.skip))
		}
	}
	slices.Sort(ids)
	b := make([]byte, 0, 6*len(ids))
	for _, x := range ids {
		b = strconv.AppendInt(b, x, 36)
		b = append(b, ',')
	}
	return string(b)
}

// flatten adds to es what they include: allOf's schemas, $ref's
// targets; false when one of them is false.
func (c *compiler) flatten(es []celem) ([]celem, bool, error) {
	// A schema is in a conjunction once: with the alternatives taken
	// apart that any of its occurrences took (the alternative chosen is
	// in the conjunction too, so the schema whole adds nothing).
	at := map[int32]int{}
	var set []celem
	cyclic := false
	add := func(e celem) {
		if i, ok := at[e.s.id]; ok {
			set[i].skip |= e.skip
			for k := e.from; k >= 0; k = set[k].from {
				if int(k) == i {
					cyclic = true // the inductive reading: no value
				}
			}
			return
		}
		at[e.s.id] = len(set)
		set = append(set, e)
	}
	for _, e := range es {
		add(e)
	}
	for i := 0; i < len(set); i++ {
		s := set[i].s
		if !c.bud.spend(1) {
			return nil, false, budgetError()
		}
		switch s.kind {
		case jBool:
			if !s.b {
				return nil, false, nil
			}
			continue
		case jObject:
		default:
			return nil, false, &SchemaError{Path: s.ptr, Msg: "a schema must be an object or a boolean"}
		}
		if err := c.checkKeywords(s); err != nil {
			return nil, false, err
		}
		if r := s.get("$ref"); r != nil {
			if r.kind != jString {
				return nil, false, kwErr(s, "$ref", "must be a string")
			}
			t, err := c.d.resolve(s, r.text)
			if err != nil {
				return nil, false, kwErr(s, "$ref", "%v", err)
			}
			add(celem{s: t, from: int32(i)})
		}
		if all := s.get("allOf"); all != nil {
			if all.kind != jArray || len(all.arr) == 0 {
				return nil, false, kwErr(s, "allOf", "must be a non-empty array of schemas")
			}
			for _, x := range all.arr {
				add(celem{s: x, from: int32(i)})
			}
		}
		if n := s.get("not"); n != nil {
			neg, err := c.negate(n)
			if err != nil {
				return nil, false, err
			}
			add(celem{s: neg, from: int32(i)})
		}
		for _, kw := range []string{"dependentSchemas", "dependencies"} {
			for _, m := range s.get(kw).objOf() {
				if m.v.kind == jArray {
					continue // dependentRequired's
				}
				add(celem{s: c.dependentIf(s, kw, m), from: int32(i)})
			}
		}
		if cyclic {
			return nil, false, nil
		}
	}
	if !c.bud.spend(2 * len(set)) {
		return nil, false, budgetError()
	}
	return set, true, nil
}

// hasNames reports whether a dependencies keyword maps a name to names
// (dependentRequired's), which the object reads.
func hasNames(v *jv) bool {
	for _, m := range v.objOf() {
		if m.v.kind == jArray {
			return true
		}
	}
	return false
}

// inert reports whether e constrains nothing once its references and
// allOf are followed and its alternatives taken apart.
func inert(e celem) bool {
	for _, m := range e.s.obj {
		switch {
		case m.k == "$ref" || m.k == "allOf" || m.k == "$defs" || m.k == "definitions" || annotation(m.k):
		case m.k == "anyOf" && e.skip&skipAnyOf != 0, m.k == "oneOf" && e.skip&skipOneOf != 0,
			(m.k == "if" || m.k == "then" || m.k == "else") && e.skip&skipIf != 0, m.k == "not",
			m.k == "dependentSchemas", m.k == "dependencies" && !hasNames(m.v):
		default:
			return false
		}
	}
	return true
}

// expand compiles a flattened conjunction: its first alternatives
// distributed, or its keywords merged.
func (c *compiler) expand(set []celem) ([]int32, error) {
	for i, e := range set {
		for _, kw := range []struct {
			name string
			bit  uint8
		}{{"anyOf", skipAnyOf}, {"oneOf", skipOneOf}} {
			subs := e.s.get(kw.name)
			if subs == nil || e.skip&kw.bit != 0 {
				continue
			}
			if subs.kind != jArray || len(subs.arr) == 0 {
				return nil, kwErr(e.s, kw.name, "must be a non-empty array of schemas")
			}
			alts, err := c.distribute(set, i, kw.bit, subs.arr, nil)
			if err != nil {
				return nil, err
			}
			if kw.name == "oneOf" && !c.exclusive(alts) {
				// Alternatives that may overlap: each less the others.
				var negs []*jv
				for _, sub := range subs.arr {
					n, err := c.negate(sub)
					if err != nil {
						return nil, kwErr(e.s, "oneOf", "has alternatives that may overlap, and one cannot be negated: %v", err)
					}
					negs = append(negs, n)
				}
				return c.distribute(set, i, kw.bit, subs.arr, negs)
			}
			return alts, nil
		}
	}
	for i, e := range set {
		cond := e.s.get("if")
		if cond == nil || e.skip&skipIf != 0 {
			continue
		}
		// if/then/else: the values that pass if and then, and those that
		// fail if and pass else; the two are disjoint.
		neg, err := c.negate(cond)
		if err != nil {
			return nil, err
		}
		var alts []int32
		for _, b := range []struct{ cond, branch *jv }{{cond, e.s.get("then")}, {neg, e.s.get("else")}} {
			rest := slices.Clone(set)
			rest[i].skip |= skipIf
			rest = append(rest, celem{s: b.cond, from: int32(i)})
			if b.branch != nil {
				rest = append(rest, celem{s: b.branch, from: int32(i)})
			}
			n, err := c.prune(c.conj(rest))
			if err != nil {
				return nil, err
			}
			alts = append(alts, n)
		}
		return alts, nil
	}
	return c.merge(set)
}

// dependentIf is dependentSchemas' member m of s as the schema
// {"if": {"required": [m.k]}, "then": m.v}, once per member.
func (c *compiler) dependentIf(s *jv, kw string, m jmember) *jv {
	key := strconv.Itoa(int(s.id)) + "/" + kw + "/" + m.k
	if x, ok := c.depIfs[key]; ok {
		return x
	}
	cond := c.synth(s, jmember{"required", c.synthArray(c.synthValue(jString, m.k))})
	x := c.synth(s, jmember{"if", cond}, jmember{"then", m.v})
	c.depIfs[key] = x
	return x
}

// distribute compiles the alternatives subs of element i of set: each
// with the rest (element i less the keyword of bit), and, when negs is
// not nil, with the negations of the other alternatives (oneOf's).
func (c *compiler) distribute(set []celem, i int, bit uint8, subs, negs []*jv) ([]int32, error) {
	var alts []int32
	for k, sub := range subs {
		rest := slices.Clone(set)
		rest[i].skip |= bit
		rest = append(rest, celem{s: sub, from: int32(i)})
		for j, n := range negs {
			if j != k {
				rest = append(rest, celem{s: n, from: int32(i)})
			}
		}
		n, err := c.conj(rest)
		if bit == skipAnyOf {
			n, err = c.prune(n, err) // an alternative it cannot serve is not taken
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	return alts, nil
}

// any returns the node of any JSON value.
func (c *compiler) any() int32 {
	if c.anyVal >= 0 {
		return c.anyVal
	}
	c.anyVal = c.none()
	obj := c.add(node{kind: kObject, obj: c.freeObject(c.anyVal)})
	arr := c.add(node{kind: kArray, arr: c.freeArray(c.anyVal)})
	str := c.anyString()
	num := c.number(numSpec{})
	lit := c.literal([]string{"true", "false", "null"})
	c.nodes[c.anyVal].alts = []int32{obj, arr, str, num, lit}
	return c.anyVal
}

// anyString returns the node of any string (within the bounds).
func (c *compiler) anyString() int32 {
	if c.anyStr < 0 {
		s, _ := newStrNode(charset(generatable()), 0, -1, c.bounds.String, nil)
		c.anyStr = c.add(node{kind: kString, str: s})
	}
	return c.anyStr
}

// freeObject is an object of any keys, values of val.
func (c *compiler) freeObject(val int32) *objNode {
	o := &objNode{extras: []extra{{key: c.anyString(), val: val}}, maxProps: -1}
	if c.bounds.Items > 0 {
		o.maxProps = c.bounds.Items
	}
	o.finish()
	return o
}

// freeArray is an array of any number of items of val.
func (c *compiler) freeArray(val int32) *arrNode {
	a := &arrNode{items: val, maxItems: -1}
	if c.bounds.Items > 0 {
		a.maxItems = c.bounds.Items
	}
	return a
}

// finish computes what an object's rules read.
func (o *objNode) finish() {
	o.trie = newKeyTrie(o.props)
	o.needed = make([]int32, len(o.props)+1)
	o.needed[len(o.props)] = int32(len(o.props))
	for j := len(o.props) - 1; j >= 0; j-- {
		o.needed[j] = o.needed[j+1]
		if o.props[j].required {
			o.needed[j] = int32(j)
		}
	}
	if o.deps == nil {
		o.deps = make([][]int32, len(o.props))
	}
	if o.bit == nil {
		o.bit = make([]int8, len(o.props))
		for j := range o.bit {
			o.bit[j] = -1
		}
	}
}

// number returns the node of the numbers of s.
func (c *compiler) number(s numSpec) int32 {
	if n, ok := c.numbers[s]; ok {
		return n
	}
	d, err := buildNumber(s, c.bud)
	n := c.add(node{kind: kNumber, num: d, spec: &s})
	if err != nil {
		c.nodes[n].num = nil
	}
	c.numbers[s] = n
	return n
}

// literal returns the node of the JSON texts.
func (c *compiler) literal(texts []string) int32 {
	return c.add(node{kind: kLiteral, lit: newLitTrie(texts)})
}

// annotation reports whether keyword k does not constrain a value.
func annotation(k string) bool { return !constrains(k) }

// checkKeywords refuses the keywords that constrain and that the
// compiler does not serve; any other it reads, or passes (annotations,
// unknown keywords and x- extensions, as validators do).
func (c *compiler) checkKeywords(s *jv) error {
	for _, m := range s.obj {
		switch m.k {
		case "$dynamicRef", "$recursiveRef":
			return kwErr(s, m.k, "is not served; use $ref")
		}
	}
	return nil
}
