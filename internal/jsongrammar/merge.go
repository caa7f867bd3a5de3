package jsongrammar

import (
	"math"
	"slices"
	"strconv"
)

// typeSet is a set of JSON types; number's values are tNum (not
// integers) and tInt.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBool
	tObject
	tArray
	tString
	tNum
	tInt
	allTypes = tNull | tBool | tObject | tArray | tString | tNum | tInt
)

func typeOf(name string) (typeSet, bool) {
	switch name {
	case "null":
		return tNull, true
	case "boolean":
		return tBool, true
	case "object":
		return tObject, true
	case "array":
		return tArray, true
	case "string":
		return tString, true
	case "number":
		return tNum | tInt, true
	case "integer":
		return tInt, true
	}
	return 0, false
}

// valueType is the type of a JSON value.
func valueType(v *jv) typeSet {
	switch v.kind {
	case jNull:
		return tNull
	case jBool:
		return tBool
	case jObject:
		return tObject
	case jArray:
		return tArray
	case jString:
		return tString
	}
	if _, d, err := parseDecimal(v.text); err == nil && d.f == "" {
		return tInt
	}
	return tNum
}

// schemaTypes reads the type keyword of s.
func schemaTypes(s *jv) (typeSet, error) {
	t := s.get("type")
	names := []*jv{t}
	if t.kind == jArray {
		names = t.arr
	}
	var ts typeSet
	for _, n := range names {
		x, ok := typeOf(n.text)
		if n.kind != jString || !ok {
			return 0, kwErr(s, "type", "must be JSON schema type names (null, boolean, object, array, string, number, integer)")
		}
		ts |= x
	}
	if len(names) == 0 {
		return 0, kwErr(s, "type", "must not be an empty list")
	}
	return ts, nil
}

// families are the types whose keywords a schema uses: what it means
// without a type (any other type would pass it unconstrained).
func families(s *jv) typeSet {
	var ts typeSet
	for _, m := range s.obj {
		switch m.k {
		case "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
			"minProperties", "maxProperties", "dependentRequired", "dependencies", "dependentSchemas":
			ts |= tObject
		case "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains":
			ts |= tArray
		case "pattern", "minLength", "maxLength":
			ts |= tString
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
			ts |= tNum | tInt
		}
	}
	return ts
}

// merge compiles a conjunction without alternatives: a node per type
// it admits.
func (c *compiler) merge(set []celem) ([]int32, error) {
	types, typed, fam := allTypes, false, typeSet(0)
	var enum []*jv
	enumSet := false
	for _, e := range set {
		s := e.s
		if s.get("type") != nil {
			ts, err := schemaTypes(s)
			if err != nil {
				return nil, err
			}
			types &= ts
			typed = true
		}
		fam |= families(s)
		for _, kw := range []string{"const", "enum"} {
			v := s.get(kw)
			if v == nil {
				continue
			}
			vals := []*jv{v}
			if kw == "enum" {
				if v.kind != jArray || len(v.arr) == 0 {
					return nil, kwErr(s, "enum", "must be a non-empty array")
				}
				vals = v.arr
			}
			if enumSet {
				vals = slices.DeleteFunc(slices.Clone(enum), func(x *jv) bool {
					return !slices.ContainsFunc(vals, func(y *jv) bool { return sameValue(x, y) })
				})
			}
			enum, enumSet = vals, true
		}
	}
	if enumSet {
		return c.enum(set, enum, types)
	}
	if !typed {
		if fam == 0 {
			return []int32{c.any()}, nil
		}
		types = fam
	}
	var alts []int32
	for _, t := range []typeSet{tObject, tArray, tString, tNum | tInt, tBool, tNull} {
		if types&t == 0 {
			continue
		}
		var n int32
		var err error
		switch t {
		case tObject:
			n, err = c.object(set)
		case tArray:
			n, err = c.array(set)
		case tString:
			n, err = c.string(set)
		case tNum | tInt:
			n, err = c.numberOf(set, types&tNum == 0)
		case tBool:
			n = c.literal([]string{"true", "false"})
		case tNull:
			n = c.literal([]string{"null"})
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	return alts, nil
}

// enum compiles the values of an enum (or const) that the rest of the
// conjunction admits.
func (c *compiler) enum(set []celem, vals []*jv, types typeSet) ([]int32, error) {
	c.lits += len(vals)
	if c.lits > MaxLiterals {
		return nil, &SchemaError{Bound: "MaxLiterals", Msg: "holds more than " + strconv.Itoa(MaxLiterals) + " enum and const values (MaxLiterals)"}
	}
	var texts []string
	for _, v := range vals {
		if types&valueType(v) == 0 {
			continue
		}
		ok, err := c.admits(v, set, 0)
		if err != nil {
			return nil, err
		}
		if t := canonical(v); ok && !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	return []int32{c.literal(texts)}, nil
}

// object compiles the object of a conjunction: the properties any part
// declares, each the conjunction of what every part says of it.
func (c *compiler) object(set []celem) (int32, error) {
	var names []string
	index := map[string]bool{}
	required := map[string]bool{}
	declare := func(k string) {
		if !index[k] {
			index[k] = true
			names = append(names, k)
		}
	}
	// Properties in the order a reader meets them: a schema's $ref and
	// allOf before its own (a model's base class first), then the rest.
	inSet := map[*jv]bool{}
	for _, e := range set {
		inSet[e.s] = true
	}
	seen := map[*jv]bool{}
	var visit func(s *jv) error
	visit = func(s *jv) error {
		if seen[s] || !inSet[s] {
			return nil
		}
		seen[s] = true
		if r := s.get("$ref"); r != nil && r.kind == jString {
			if t, err := c.d.resolve(s, r.text); err == nil {
				if err := visit(t); err != nil {
					return err
				}
			}
		}
		if all := s.get("allOf"); all != nil {
			for _, x := range all.arr {
				if err := visit(x); err != nil {
					return err
				}
			}
		}
		if p := s.get("properties"); p != nil {
			if p.kind != jObject {
				return kwErr(s, "properties", "must be an object")
			}
			for _, m := range p.obj {
				declare(m.k)
			}
		}
		if r := s.get("required"); r != nil {
			if r.kind != jArray {
				return kwErr(s, "required", "must be a list of names")
			}
			for _, x := range r.arr {
				if x.kind != jString {
					return kwErr(s, "required", "must be a list of names")
				}
				required[x.text] = true
			}
		}
		return nil
	}
	for _, e := range set {
		if err := visit(e.s); err != nil {
			return 0, err
		}
	}
	for _, e := range set {
		if r := e.s.get("required"); r != nil {
			for _, x := range r.arr {
				declare(x.text)
			}
		}
	}
	o := &objNode{maxProps: -1}
	for _, k := range names {
		parts, forbidden := c.propertyParts(set, k)
		if forbidden {
			if required[k] {
				return c.none(), nil
			}
			continue
		}
		val, err := c.conjOrAny(parts)
		if err != nil {
			return 0, err
		}
		o.props = append(o.props, prop{name: k, val: val, required: required[k]})
	}
	if err := c.extras(set, o, names); err != nil {
		return 0, err
	}
	o.finish()
	return c.add(node{kind: kObject, obj: o}), nil
}

// propertyParts is what each part of a conjunction says of property k:
// its schema, or the part's additionalProperties; forbidden when a part
// admits no such property.
func (c *compiler) propertyParts(set []celem, k string) (parts []celem, forbidden bool) {
	for _, e := range set {
		s := e.s
		if p := s.get("properties").get(k); p != nil {
			parts = append(parts, whole(p))
			continue
		}
		switch a := s.get("additionalProperties"); {
		case a == nil:
		case a.kind == jBool && !a.b:
			return nil, true
		case a.kind == jObject:
			parts = append(parts, whole(a))
		}
	}
	return parts, false
}

// extras adds the undeclared members an object may have: when a part
// gives additionalProperties a schema, or none declares a property, and
// no part forbids them; their keys are none of names.
func (c *compiler) extras(set []celem, o *objNode, names []string) error {
	var parts []celem
	explicit := false
	for _, e := range set {
		switch a := e.s.get("additionalProperties"); {
		case a == nil:
		case a.kind == jBool && !a.b:
			o.closed = true
			return nil
		case a.kind == jObject:
			parts = append(parts, whole(a))
			explicit = true
		}
	}
	if len(names) > 0 && !explicit {
		return nil
	}
	val, err := c.conjOrAny(parts)
	if err != nil {
		return err
	}
	key := c.anyString()
	if len(names) > 0 {
		d := literals(names).complement()
		s, err := newStrNode(d, 0, -1, c.bounds.String, c.bud)
		if err != nil {
			return &SchemaError{Keyword: "properties", Msg: err.Error()}
		}
		key = c.add(node{kind: kString, str: s})
	}
	o.extras = []extra{{key: key, val: val}}
	if c.bounds.Items > 0 {
		o.maxProps = len(o.props) + c.bounds.Items
	}
	return nil
}

// conjOrAny compiles parts, any value when there are none.
func (c *compiler) conjOrAny(parts []celem) (int32, error) {
	if len(parts) == 0 {
		return c.any(), nil
	}
	return c.conj(parts)
}

// array compiles the array of a conjunction.
func (c *compiler) array(set []celem) (int32, error) {
	a := &arrNode{items: -1, maxItems: -1}
	var parts []celem
	for _, e := range set {
		s := e.s
		if it := s.get("items"); it != nil {
			parts = append(parts, whole(it))
		}
		for _, b := range []struct {
			k  string
			lo bool
		}{{"minItems", true}, {"maxItems", false}} {
			v := s.get(b.k)
			if v == nil {
				continue
			}
			n, ok := count(v)
			if !ok {
				return 0, kwErr(s, b.k, "must be a non-negative integer")
			}
			switch {
			case b.lo:
				a.minItems = max(a.minItems, n)
			case a.maxItems < 0 || n < a.maxItems:
				a.maxItems = n
			}
		}
	}
	items, err := c.conjOrAny(parts)
	if err != nil {
		return 0, err
	}
	a.items, a.smax = items, a.maxItems
	if a.maxItems < 0 && c.bounds.Items > 0 {
		a.maxItems = max(c.bounds.Items, a.minItems, len(a.prefix))
	}
	if a.maxItems >= 0 && a.maxItems < a.minItems {
		return c.none(), nil
	}
	return c.add(node{kind: kArray, arr: a}), nil
}

// count reads a non-negative integer keyword.
func count(v *jv) (int, bool) {
	if v == nil || v.kind != jNumber {
		return 0, false
	}
	_, d, err := parseDecimal(v.text)
	if err != nil || d.f != "" || len(d.i) > 7 || v.text[0] == '-' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(d.i); i++ {
		n = n*10 + int(d.i[i]-'0')
	}
	return min(n, math.MaxInt32), true
}

// string compiles the string of a conjunction: the intersection of its
// patterns.
func (c *compiler) string(set []celem) (int32, error) {
	d := charset(generatable())
	for _, e := range set {
		s := e.s
		p := s.get("pattern")
		if p == nil {
			continue
		}
		if p.kind != jString {
			return 0, kwErr(s, "pattern", "must be a string")
		}
		pd, err := c.pattern(p.text)
		if err != nil {
			return 0, kwErr(s, "pattern", "%v", err)
		}
		var ok bool
		if d, ok = intersect(d, pd, c.bud); !ok {
			return 0, kwErr(s, "pattern", "%v", errTooBig)
		}
	}
	sn, err := newStrNode(d, 0, -1, c.bounds.String, c.bud)
	if err != nil {
		return 0, &SchemaError{Keyword: "pattern", Msg: err.Error()}
	}
	if sn.universal && sn.min == 0 && sn.max == c.stringCap() {
		return c.anyString(), nil
	}
	return c.add(node{kind: kString, str: sn}), nil
}

func (c *compiler) stringCap() int {
	if c.bounds.String > 0 {
		return c.bounds.String
	}
	return -1
}

// pattern compiles a pattern once per compilation.
func (c *compiler) pattern(src string) (*cdfa, error) {
	if d, ok := c.patterns[src]; ok {
		return d, nil
	}
	d, err := compilePattern(src, c.bud)
	if err != nil {
		return nil, err
	}
	c.patterns[src] = d
	return d, nil
}

// numberOf compiles the number of a conjunction.
func (c *compiler) numberOf(set []celem, integer bool) (int32, error) {
	return c.number(numSpec{integer: integer}), nil
}
