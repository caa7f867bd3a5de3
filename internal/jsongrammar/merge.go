package jsongrammar

import (
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
			"minProperties", "maxProperties", "dependentRequired", "dependencies", "dependentSchemas",
			"unevaluatedProperties", kwAbsent:
			ts |= tObject
		case "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
			"minContains", "unevaluatedItems":
			ts |= tArray
		case "pattern", "minLength", "maxLength", kwNotPattern:
			ts |= tString
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
			ts |= tNum | tInt
		case "format":
			if _, _, ok := stringFormat(m.v.text); ok {
				ts |= tString
			} else if isNumberFormat(m.v.text) {
				ts |= tNum | tInt
			}
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
	if !typed && fam != 0 {
		types = fam
	}
	if !typed && fam == 0 && len(excluded(set)) == 0 {
		return []int32{c.any()}, nil
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
		case tBool, tNull:
			lits := []string{"null"}
			if t == tBool {
				lits = []string{"true", "false"}
			}
			lits = slices.DeleteFunc(lits, func(l string) bool {
				return slices.ContainsFunc(excluded(set), func(x *jv) bool { return x.json() == l })
			})
			n = c.literal(lits)
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
		if t := v.json(); ok && !slices.Contains(texts, t) { // as written: a number's digits kept
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	return []int32{c.literal(texts)}, nil
}
