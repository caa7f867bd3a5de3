package jsongrammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// jkind is the kind of a JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jv is a JSON value of a schema document, its members in order (a
// schema's properties are generated in the order written).
type jv struct {
	kind jkind
	b    bool
	text string // a number's text, a string's value
	arr  []*jv
	obj  []jmember
	id   int32  // an id, unique in its document
	ptr  string // its JSON pointer in the document
	base string // the base URI its $ref resolve against
	// idx indexes a large object's members by key, once asked.
	idx map[string]*jv
	// neg: a schema the compiler wrote for a negation, whose
	// annotations (the properties and items it evaluates) do not count.
	neg bool
}

type jmember struct {
	k string
	v *jv
}

// get returns member k of an object, nil if none; of a key written
// twice, the last (as Go's and most JSON parsers read it).
func (v *jv) get(k string) *jv {
	if v == nil || v.kind != jObject {
		return nil
	}
	if len(v.obj) > 16 {
		if v.idx == nil {
			v.idx = make(map[string]*jv, len(v.obj))
			for _, m := range v.obj {
				v.idx[m.k] = m.v
			}
		}
		return v.idx[k]
	}
	for _, m := range slices.Backward(v.obj) {
		if m.k == k {
			return m.v
		}
	}
	return nil
}

// json is v as compact JSON text, its members in order.
func (v *jv) json() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *jv) write(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		b.WriteString(v.text)
	case jString:
		b.WriteString(jsonString(v.text))
	case jArray:
		b.WriteByte('[')
		for i, x := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			x.write(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(m.k))
			b.WriteByte(':')
			m.v.write(b)
		}
		b.WriteByte('}')
	}
}

// jsonString is s as a JSON string, escaped as the grammar writes it:
// only what JSON must escape.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// maxDocDepth bounds the nesting of a schema document's JSON.
const maxDocDepth = 2 * MaxSchemaDepth

// doc is a parsed schema document.
type doc struct {
	root      *jv
	n         int32          // values so far
	resources map[string]*jv // absolute URIs ($id) to their schemas
	anchors   map[string]*jv // absolute URI#anchor to their schemas
	// legacy: a draft 7 or older document, whose $ref makes its siblings
	// ($id included) ignored.
	legacy bool
}

// parseDoc parses a schema document and indexes its identifiers.
func parseDoc(text []byte) (*doc, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	d := &doc{resources: map[string]*jv{}, anchors: map[string]*jv{}}
	root, err := d.value(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("has text after its value")
	}
	d.root = root
	if s := root.get("$schema"); s != nil && s.kind == jString {
		for _, old := range []string{"draft-03", "draft-04", "draft-06", "draft-07"} {
			d.legacy = d.legacy || strings.Contains(s.text, old)
		}
	}
	d.index(root, "urn:jsongrammar:root", 0)
	d.share(root, map[string]int32{})
	return d, nil
}

// share gives equal values (the same JSON, under the same base URI)
// the same id, bottom up: a schema written many times is one schema to
// the compiler, whose conjunctions are keyed by ids.
func (d *doc) share(v *jv, ids map[string]int32) int32 {
	var b []byte
	b = append(b, byte(v.kind))
	switch v.kind {
	case jBool:
		b = strconv.AppendBool(b, v.b)
	case jNumber, jString:
		b = append(b, v.text...)
	case jArray:
		for _, x := range v.arr {
			b = strconv.AppendInt(append(b, ','), int64(d.share(x, ids)), 36)
		}
	case jObject:
		b = append(b, v.base...)
		for _, m := range v.obj {
			b = append(b, 0)
			b = append(b, m.k...)
			b = strconv.AppendInt(append(b, 0), int64(d.share(m.v, ids)), 36)
		}
	}
	id, ok := ids[string(b)]
	if !ok {
		id = int32(len(ids))
		ids[string(b)] = id
	}
	v.id = id
	return id
}

func (d *doc) value(dec *json.Decoder, ptr string, depth int) (*jv, error) {
	if depth > maxDocDepth {
		return nil, fmt.Errorf("nests deeper than %d", maxDocDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON")
	}
	v := &jv{id: d.n, ptr: ptr}
	d.n++
	switch t := t.(type) {
	case nil:
	case bool:
		v.kind, v.b = jBool, t
	case json.Number:
		v.kind, v.text = jNumber, string(t)
	case string:
		v.kind, v.text = jString, t
	case json.Delim:
		if t == '[' {
			v.kind = jArray
			for i := 0; dec.More(); i++ {
				x, err := d.value(dec, ptr+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, x)
			}
		} else {
			v.kind = jObject
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("is not valid JSON")
				}
				k := kt.(string)
				x, err := d.value(dec, ptr+"/"+escapePointer(k), depth+1)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, jmember{k, x})
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("is not valid JSON")
		}
	}
	return v, nil
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// Keywords whose value is a schema, a list of schemas, or a map of
// names to schemas: where identifiers are looked for.
var (
	schemaKeywords    = []string{"items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
	schemaListKeys    = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMapKeywords = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

// index records the identifiers of schema v and its subschemas; base is
// the URI in force.
func (d *doc) index(v *jv, base string, depth int) {
	if v.kind != jObject || depth > maxDocDepth {
		return
	}
	id := v.get("$id")
	if d.legacy && v.get("$ref") != nil {
		id = nil
	} else if id == nil {
		if old := v.get("id"); old != nil && old.kind == jString && v.get("$ref") == nil {
			id = old // draft-04
		}
	}
	if id != nil && id.kind == jString {
		if strings.HasPrefix(id.text, "#") {
			d.anchors[base+id.text] = v // draft-04's plain-name fragment
		} else if u, err := resolveURI(base, id.text); err == nil {
			uri, _, _ := strings.Cut(u, "#")
			base = uri
			d.resources[uri] = v
		}
	}
	if a := v.get("$anchor"); a != nil && a.kind == jString {
		d.anchors[base+"#"+a.text] = v
	}
	v.base = base
	for _, k := range schemaKeywords {
		if s := v.get(k); s != nil {
			d.index(s, base, depth+1)
		}
	}
	for _, k := range schemaListKeys {
		if s := v.get(k); s != nil && s.kind == jArray {
			for _, x := range s.arr {
				d.index(x, base, depth+1)
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if s := v.get(k); s != nil && s.kind == jObject {
			for _, m := range s.obj {
				d.index(m.v, base, depth+1)
			}
		}
	}
}

func resolveURI(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}

// resolve returns the schema $ref ref points to from schema at.
func (d *doc) resolve(at *jv, ref string) (*jv, error) {
	base := at.base
	if base == "" {
		base = d.root.base
	}
	u, err := resolveURI(base, ref)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URI reference", ref)
	}
	uri, frag, _ := strings.Cut(u, "#")
	res := d.resources[uri]
	if uri == d.root.base {
		res = d.root
	}
	if res == nil {
		return nil, fmt.Errorf("%q is not in the schema (only references within the schema are served)", ref)
	}
	if frag == "" {
		return res, nil
	}
	if !strings.HasPrefix(frag, "/") {
		if a := d.anchors[uri+"#"+frag]; a != nil {
			return a, nil
		}
		return nil, fmt.Errorf("%q names no anchor of the schema", ref)
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	cur := res
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *jv
		switch cur.kind {
		case jObject:
			next = cur.get(tok)
		case jArray:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(cur.arr) {
				next = cur.arr[i]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%q points to nothing in the schema", ref)
		}
		cur = next
	}
	return cur, nil
}
