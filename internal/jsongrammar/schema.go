package jsongrammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Bounds of a schema and of what it generates.
const (
	MaxSchemaBytes = 64 << 10 // a schema's JSON text
	MaxSchemaDepth = 32       // nesting of subschemas in the text
	MaxNodes       = 4096     // nodes a schema compiles to
	MaxLiterals    = 1024     // enum values, over the whole schema
	MaxStackDepth  = 32       // nesting of generated values
	MaxDigits      = 16       // digits of a number's integer, fraction or exponent part
)

// SchemaError is a schema the package cannot compile. Keyword names the
// offending keyword (empty when the schema is malformed as a whole) and
// Path where it is, as a JSON pointer.
type SchemaError struct {
	Keyword string
	Path    string
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Keyword == "" {
		return "schema: " + e.Msg
	}
	return fmt.Sprintf("schema keyword %q at %q: %s", e.Keyword, e.Path, e.Msg)
}

// kind is what a node generates.
type kind uint8

const (
	kEnd     kind = iota // the bottom of every stack: nothing more
	kAnyOf               // one of alts
	kObject              // props in order, or free keys when free
	kArray               // items, between minItems and maxItems
	kString              // any string, or pat's
	kNumber              // a JSON number
	kInteger             // a JSON integer
	kLiteral             // one of lits, JSON text
)

type prop struct {
	lit      string // the key, JSON-encoded with its quotes
	val      int
	required bool
}

type node struct {
	kind     kind
	alts     []int
	props    []prop
	free     bool // object: any keys, values of addl
	addl     int
	items    int
	minItems int
	maxItems int // -1: none
	lits     []string
	pat      *pattern
	keyStr   int // free object: the node of its keys
}

// Grammar is a compiled schema. It is immutable and safe to share.
type Grammar struct {
	nodes []node
	root  int
	// Key identifies the grammar: equal keys, equal grammars.
	Key string
	// Bounds of what it generates beyond the schema's (0: none).
	maxString, maxItems, maxDepth int
}

// Bounded returns g generating strings of at most maxString bytes
// (escapes counted as written), arrays without maxItems and objects
// with free keys of at most maxItems members, values nested at most
// maxDepth deep: what a model that never closes a value needs to end.
func (g *Grammar) Bounded(maxString, maxItems, maxDepth int) *Grammar {
	b := *g
	b.maxString, b.maxItems, b.maxDepth = maxString, maxItems, maxDepth
	b.Key = BoundedKey(g.Key, maxString, maxItems, maxDepth)
	return &b
}

// BoundedKey is the Key of grammar key Bounded so.
func BoundedKey(key string, maxString, maxItems, maxDepth int) string {
	return fmt.Sprintf("%s bounded:%d,%d,%d", key, maxString, maxItems, maxDepth)
}

// ignored reports whether keyword k is an annotation: it does not
// constrain the value.
func ignored(k string) bool {
	switch k {
	case "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly", "strict", "$defs", "definitions":
		return true
	}
	return false
}

// Member is a member of a JSON object, in document order (a schema's
// keywords, its properties: order matters to what is generated).
type Member struct {
	Key   string
	Value json.RawMessage
}

// Members returns the members of a JSON object in order; false when raw
// is not one.
func Members(raw json.RawMessage) ([]Member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if d, ok := t.(json.Delim); err != nil || !ok || d != '{' {
		return nil, false
	}
	var out []Member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, Member{t.(string), v})
	}
	return out, true
}

type compiler struct {
	nodes  []node
	defs   map[string]json.RawMessage // "#/$defs/x" -> schema
	refs   map[string]int             // compiled refs
	lits   int
	anyVal int // the node of any JSON value, -1 until needed
}

// JSONObject returns the grammar of any JSON object: json_object mode
// without a schema.
func JSONObject() *Grammar {
	c := &compiler{anyVal: -1}
	c.add(node{kind: kEnd})
	root := c.add(node{kind: kObject, free: true, addl: c.any(), keyStr: c.add(node{kind: kString})})
	return &Grammar{nodes: c.nodes, root: root, Key: "json_object"}
}

// CompileSchema compiles a JSON schema.
func CompileSchema(schema []byte) (*Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, &SchemaError{Msg: fmt.Sprintf("is %d bytes, more than %d", len(schema), MaxSchemaBytes)}
	}
	if !json.Valid(schema) {
		return nil, &SchemaError{Msg: "is not valid JSON"}
	}
	c := &compiler{defs: map[string]json.RawMessage{}, refs: map[string]int{}, anyVal: -1}
	c.add(node{kind: kEnd})
	if top, ok := Members(schema); ok {
		for _, m := range top {
			if m.Key != "$defs" && m.Key != "definitions" {
				continue
			}
			defs, ok := Members(m.Value)
			if !ok {
				return nil, &SchemaError{Keyword: m.Key, Path: "/" + m.Key, Msg: "must be an object"}
			}
			for _, d := range defs {
				c.defs["#/"+m.Key+"/"+d.Key] = d.Value
			}
		}
	}
	root, err := c.compile(schema, "", 0)
	if err != nil {
		return nil, err
	}
	if c.cyclic() {
		return nil, &SchemaError{Keyword: "$ref", Path: "", Msg: "a reference cycle admits no value: each cycle must pass through an object or an array"}
	}
	var key bytes.Buffer
	_ = json.Compact(&key, schema)
	return &Grammar{nodes: c.nodes, root: root, Key: "schema:" + key.String()}, nil
}

// cyclic reports whether alternatives lead back to themselves without a
// value between (a $ref cycle of anyOf nodes).
func (c *compiler) cyclic() bool {
	const (
		unseen = iota
		open
		done
	)
	mark := make([]uint8, len(c.nodes))
	var visit func(n int) bool
	visit = func(n int) bool {
		switch mark[n] {
		case open:
			return true
		case done:
			return false
		}
		mark[n] = open
		if c.nodes[n].kind == kAnyOf {
			for _, a := range c.nodes[n].alts {
				if visit(a) {
					return true
				}
			}
		}
		mark[n] = done
		return false
	}
	for n := range c.nodes {
		if visit(n) {
			return true
		}
	}
	return false
}

func (c *compiler) add(n node) int {
	c.nodes = append(c.nodes, n)
	return len(c.nodes) - 1
}

func (c *compiler) errf(kw, path, format string, args ...any) error {
	return &SchemaError{Keyword: kw, Path: path + "/" + kw, Msg: fmt.Sprintf(format, args...)}
}

// any returns the node of any JSON value.
func (c *compiler) any() int {
	if c.anyVal >= 0 {
		return c.anyVal
	}
	c.anyVal = c.add(node{kind: kAnyOf})
	obj := c.add(node{kind: kObject, free: true, addl: c.anyVal, keyStr: c.add(node{kind: kString})})
	arr := c.add(node{kind: kArray, items: c.anyVal, maxItems: -1})
	str := c.add(node{kind: kString})
	num := c.add(node{kind: kNumber})
	lit := c.add(node{kind: kLiteral, lits: []string{"true", "false", "null"}})
	c.nodes[c.anyVal].alts = []int{obj, arr, str, num, lit}
	return c.anyVal
}

// compile compiles the subschema raw at path.
func (c *compiler) compile(raw json.RawMessage, path string, depth int) (int, error) {
	if depth > MaxSchemaDepth {
		return 0, &SchemaError{Path: path, Msg: fmt.Sprintf("nests deeper than %d", MaxSchemaDepth)}
	}
	if len(c.nodes) > MaxNodes {
		return 0, &SchemaError{Path: path, Msg: fmt.Sprintf("compiles to more than %d nodes", MaxNodes)}
	}
	switch t := strings.TrimSpace(string(raw)); t {
	case "true", "{}":
		return c.any(), nil
	case "false":
		return 0, &SchemaError{Path: path, Msg: "false admits no value"}
	}
	ms, ok := Members(raw)
	if !ok {
		return 0, &SchemaError{Path: path, Msg: "a schema must be an object or a boolean"}
	}
	kw := map[string]json.RawMessage{}
	for _, m := range ms {
		kw[m.Key] = m.Value
	}
	for _, m := range ms {
		switch m.Key {
		case "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
			"enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern":
		default:
			if !ignored(m.Key) {
				return 0, c.errf(m.Key, path, "is not supported")
			}
		}
	}
	if r, ok := kw["$ref"]; ok {
		if len(kw) > 1 && !onlyAnnotations(ms, "$ref") {
			return 0, c.errf("$ref", path, "cannot be combined with other keywords")
		}
		return c.ref(r, path, depth)
	}
	if v, ok := kw["const"]; ok {
		return c.literals([]json.RawMessage{v}, "const", path)
	}
	if v, ok := kw["enum"]; ok {
		var vals []json.RawMessage
		if json.Unmarshal(v, &vals) != nil || len(vals) == 0 {
			return 0, c.errf("enum", path, "must be a non-empty array")
		}
		return c.literals(vals, "enum", path)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		v, ok := kw[k]
		if !ok {
			continue
		}
		var subs []json.RawMessage
		if json.Unmarshal(v, &subs) != nil || len(subs) == 0 {
			return 0, c.errf(k, path, "must be a non-empty array of schemas")
		}
		if k == "allOf" && len(subs) != 1 {
			return 0, c.errf(k, path, "is supported with one schema only")
		}
		if k != "allOf" && kw["type"] != nil {
			return 0, c.errf(k, path, "cannot be combined with type")
		}
		n := c.add(node{kind: kAnyOf})
		var alts []int
		for i, s := range subs {
			a, err := c.compile(s, fmt.Sprintf("%s/%s/%d", path, k, i), depth+1)
			if err != nil {
				return 0, err
			}
			alts = append(alts, a)
		}
		c.nodes[n].alts = alts
		return n, nil
	}
	var types []string
	if v, ok := kw["type"]; ok {
		var one string
		if json.Unmarshal(v, &one) == nil {
			types = []string{one}
		} else if json.Unmarshal(v, &types) != nil || len(types) == 0 {
			return 0, c.errf("type", path, "must be a type name or a non-empty list of them")
		}
	} else {
		types = inferTypes(kw)
		if types == nil {
			return c.any(), nil
		}
	}
	var alts []int
	for _, t := range types {
		n, err := c.typed(t, kw, path, depth)
		if err != nil {
			return 0, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.add(node{kind: kAnyOf, alts: alts}), nil
}

func onlyAnnotations(ms []Member, except string) bool {
	for _, m := range ms {
		if m.Key != except && !ignored(m.Key) {
			return false
		}
	}
	return true
}

// inferTypes returns the types a schema without "type" implies by its
// keywords, nil for any value.
func inferTypes(kw map[string]json.RawMessage) []string {
	switch {
	case kw["properties"] != nil || kw["required"] != nil || kw["additionalProperties"] != nil:
		return []string{"object"}
	case kw["items"] != nil || kw["minItems"] != nil || kw["maxItems"] != nil:
		return []string{"array"}
	case kw["pattern"] != nil:
		return []string{"string"}
	}
	return nil
}

func (c *compiler) ref(r json.RawMessage, path string, depth int) (int, error) {
	var name string
	if json.Unmarshal(r, &name) != nil {
		return 0, c.errf("$ref", path, "must be a string")
	}
	if n, ok := c.refs[name]; ok {
		return n, nil
	}
	if name == "#" {
		return 0, c.errf("$ref", path, "to the root schema is not supported; use $defs")
	}
	def, ok := c.defs[name]
	if !ok {
		return 0, c.errf("$ref", path, "%q is not under #/$defs or #/definitions", name)
	}
	// A placeholder first, so that a recursive reference finds it.
	n := c.add(node{kind: kAnyOf})
	c.refs[name] = n
	target, err := c.compile(def, strings.TrimPrefix(name, "#"), depth+1)
	if err != nil {
		return 0, err
	}
	c.nodes[n].alts = []int{target}
	return n, nil
}

func (c *compiler) literals(vals []json.RawMessage, kwName, path string) (int, error) {
	c.lits += len(vals)
	if c.lits > MaxLiterals {
		return 0, c.errf(kwName, path, "more than %d values in the schema", MaxLiterals)
	}
	var lits []string
	for _, v := range vals {
		var x any
		if json.Unmarshal(v, &x) != nil {
			return 0, c.errf(kwName, path, "is not JSON")
		}
		b, err := json.Marshal(x)
		if err != nil {
			return 0, c.errf(kwName, path, "%v", err)
		}
		if !slices.Contains(lits, string(b)) {
			lits = append(lits, string(b))
		}
	}
	return c.add(node{kind: kLiteral, lits: lits}), nil
}

// typed compiles the schema's keywords that apply to type t.
func (c *compiler) typed(t string, kw map[string]json.RawMessage, path string, depth int) (int, error) {
	switch t {
	case "null":
		return c.add(node{kind: kLiteral, lits: []string{"null"}}), nil
	case "boolean":
		return c.add(node{kind: kLiteral, lits: []string{"true", "false"}}), nil
	case "number":
		return c.add(node{kind: kNumber}), nil
	case "integer":
		return c.add(node{kind: kInteger}), nil
	case "string":
		n := node{kind: kString}
		if p, ok := kw["pattern"]; ok {
			var src string
			if json.Unmarshal(p, &src) != nil {
				return 0, c.errf("pattern", path, "must be a string")
			}
			pat, err := parsePattern(src)
			if err != nil {
				return 0, c.errf("pattern", path, "%v", err)
			}
			n.pat = pat
		}
		return c.add(n), nil
	case "array":
		return c.array(kw, path, depth)
	case "object":
		return c.object(kw, path, depth)
	}
	return 0, c.errf("type", path, "%q is not a JSON schema type", t)
}

func (c *compiler) array(kw map[string]json.RawMessage, path string, depth int) (int, error) {
	n := node{kind: kArray, maxItems: -1}
	for _, b := range []struct {
		k string
		p *int
	}{{"minItems", &n.minItems}, {"maxItems", &n.maxItems}} {
		v, ok := kw[b.k]
		if !ok {
			continue
		}
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 || f != math.Trunc(f) || f > 1<<20 {
			return 0, c.errf(b.k, path, "must be a non-negative integer")
		}
		*b.p = int(f)
	}
	if n.maxItems >= 0 && n.maxItems < n.minItems {
		return 0, c.errf("maxItems", path, "is less than minItems")
	}
	id := c.add(n)
	items := c.any()
	if v, ok := kw["items"]; ok {
		var err error
		if items, err = c.compile(v, path+"/items", depth+1); err != nil {
			return 0, err
		}
	}
	c.nodes[id].items = items
	return id, nil
}

func (c *compiler) object(kw map[string]json.RawMessage, path string, depth int) (int, error) {
	id := c.add(node{kind: kObject})
	var required []string
	if v, ok := kw["required"]; ok && json.Unmarshal(v, &required) != nil {
		return 0, c.errf("required", path, "must be a list of names")
	}
	var props []prop
	if v, ok := kw["properties"]; ok {
		ms, ok := Members(v)
		if !ok {
			return 0, c.errf("properties", path, "must be an object")
		}
		for _, m := range ms {
			val, err := c.compile(m.Value, path+"/properties/"+m.Key, depth+1)
			if err != nil {
				return 0, err
			}
			lit, _ := json.Marshal(m.Key)
			props = append(props, prop{lit: string(lit), val: val, required: slices.Contains(required, m.Key)})
		}
	}
	for _, r := range required {
		if !slices.ContainsFunc(props, func(p prop) bool { l, _ := json.Marshal(r); return p.lit == string(l) }) {
			return 0, c.errf("required", path, "names %q, which is not among the properties", r)
		}
	}
	n := node{kind: kObject, props: props}
	if v, ok := kw["additionalProperties"]; ok {
		switch strings.TrimSpace(string(v)) {
		case "false", "true":
		default:
			if len(props) > 0 {
				return 0, c.errf("additionalProperties", path, "a schema for additional properties is supported only for an object without properties")
			}
			addl, err := c.compile(v, path+"/additionalProperties", depth+1)
			if err != nil {
				return 0, err
			}
			n.free, n.addl = true, addl
		}
	}
	if len(props) == 0 && !n.free && strings.TrimSpace(string(kw["additionalProperties"])) != "false" {
		n.free, n.addl = true, c.any()
	}
	if n.free {
		n.keyStr = c.add(node{kind: kString})
	}
	c.nodes[id] = n
	return id, nil
}
