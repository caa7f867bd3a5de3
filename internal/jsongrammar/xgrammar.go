package jsongrammar

import (
	"fmt"
	"math/big"
	"regexp/syntax"
	"strings"
)

// MLC's engines compile a response format's schema with xgrammar
// (mlc-ai/xgrammar, cpp/json_schema_converter.cc, SchemaParser), which
// reads more than the built-in engine (and ignores some keywords it does
// not honour: uniqueItems, not, if/then/else...). CheckXGrammar refuses
// what it refuses, so that a router in front of MLC's engines forwards
// the rest instead of refusing by the built-in engine's rules. It follows
// SchemaParser::Parse: each schema is read by its first keyword of $ref,
// const, enum, anyOf, oneOf, allOf, type (or the object and array
// keywords without a type), and only that one, as xgrammar does.

// CheckXGrammar returns a SchemaError where xgrammar's schema parser
// would fail on schema (a malformed keyword, a range that admits
// nothing, an integer bound beyond int64, which xgrammar checks fatally),
// nil where it compiles it.
func CheckXGrammar(schema []byte) error {
	if len(schema) > MaxSchemaBytes {
		return &SchemaError{Bound: "MaxSchemaBytes", Msg: fmt.Sprintf("is %d bytes, more than %d (MaxSchemaBytes)", len(schema), MaxSchemaBytes)}
	}
	d, err := parseDoc(schema)
	if err != nil {
		return &SchemaError{Msg: err.Error()}
	}
	x := &xgChecker{d: d, seen: map[*jv]bool{}, bud: &budget{left: MaxCompileSteps}}
	return x.check(d.root)
}

type xgChecker struct {
	d    *doc
	seen map[*jv]bool
	bud  *budget
}

// xgInt reads an xgrammar integer keyword: picojson's int64, a number
// written without fraction or exponent.
func xgInt(v *jv) (*big.Int, bool) {
	if v.kind != jNumber || strings.ContainsAny(v.text, ".eE") {
		return nil, false
	}
	n, ok := new(big.Int).SetString(v.text, 10)
	return n, ok && n.IsInt64()
}

func (x *xgChecker) check(s *jv) error {
	if x.seen[s] {
		return nil
	}
	x.seen[s] = true
	if !x.bud.spend(len(s.obj) + 1) {
		return budgetError()
	}
	switch s.kind {
	case jBool:
		if !s.b {
			return &SchemaError{Path: s.ptr, Msg: "false admits no value (xgrammar)"}
		}
		return nil
	case jObject:
	default:
		return &SchemaError{Path: s.ptr, Msg: "a schema must be an object or a boolean (xgrammar)"}
	}
	switch {
	case s.get("$ref") != nil:
		return x.ref(s)
	case s.get("const") != nil:
		return nil
	case s.get("enum") != nil:
		if e := s.get("enum"); e.kind != jArray || len(e.arr) == 0 {
			return kwErr(s, "enum", "must be a non-empty array (xgrammar)")
		}
		return nil
	case s.get("anyOf") != nil, s.get("oneOf") != nil, s.get("allOf") != nil:
		kw := "anyOf"
		if s.get(kw) == nil {
			kw = "oneOf"
			if s.get(kw) == nil {
				kw = "allOf"
			}
		}
		subs := s.get(kw)
		if subs.kind != jArray {
			return kwErr(s, kw, "must be an array (xgrammar)")
		}
		for _, sub := range subs.arr {
			if err := x.check(sub); err != nil {
				return err
			}
		}
		return nil
	case s.get("type") != nil:
		t := s.get("type")
		switch t.kind {
		case jString:
			return x.typed(s, t.text)
		case jArray:
			for _, n := range t.arr {
				if n.kind != jString {
					return kwErr(s, "type", "must be a string or an array of strings (xgrammar)")
				}
				if err := x.typed(s, n.text); err != nil {
					return err
				}
			}
			return nil
		}
		return kwErr(s, "type", "should be a string (xgrammar)")
	case s.get("properties") != nil || s.get("additionalProperties") != nil || s.get("unevaluatedProperties") != nil:
		return x.object(s)
	case s.get("items") != nil || s.get("prefixItems") != nil || s.get("unevaluatedItems") != nil:
		return x.array(s)
	}
	return nil
}

func (x *xgChecker) ref(s *jv) error {
	r := s.get("$ref")
	if r.kind != jString {
		return kwErr(s, "$ref", "must be a string (xgrammar)")
	}
	if r.text != "#" && !strings.HasPrefix(r.text, "#/") {
		return nil // xgrammar warns, and reads any value
	}
	cur := x.d.root
	if r.text != "#" {
		for _, part := range strings.Split(r.text[2:], "/") {
			if part == "" {
				continue
			}
			next := cur.get(part)
			if next == nil {
				return kwErr(s, "$ref", "%q: no field %q (xgrammar)", r.text, part)
			}
			cur = next
		}
	}
	return x.check(cur)
}

func (x *xgChecker) typed(s *jv, t string) error {
	switch t {
	case "integer":
		return x.integer(s)
	case "number":
		return x.number(s)
	case "string":
		return x.string(s)
	case "boolean", "null":
		return nil
	case "array":
		return x.array(s)
	case "object":
		return x.object(s)
	}
	return kwErr(s, "type", "%q is not a type (xgrammar)", t)
}

func (x *xgChecker) integer(s *jv) error {
	var lo, hi *big.Int
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		if v.kind != jNumber {
			return kwErr(s, kw, "must be a number (xgrammar)")
		}
		r, ok := new(big.Rat).SetString(v.text)
		if !ok || !r.IsInt() {
			return kwErr(s, kw, "must be a whole number (xgrammar)")
		}
		n := r.Num()
		if !n.IsInt64() || n.Int64() == -1<<63 || n.Int64() == 1<<63-1 {
			return kwErr(s, kw, "is beyond what xgrammar reads as an int64 bound")
		}
		switch kw {
		case "minimum":
			lo = maxInt(lo, n)
		case "exclusiveMinimum":
			lo = maxInt(lo, new(big.Int).Add(n, big.NewInt(1)))
		case "maximum":
			hi = minInt(hi, n)
		default:
			hi = minInt(hi, new(big.Int).Sub(n, big.NewInt(1)))
		}
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return kwErr(s, "minimum", "the range admits no integer (xgrammar)")
	}
	if m := s.get("multipleOf"); m != nil {
		r, ok := new(big.Rat).SetString(m.text)
		if m.kind != jNumber || !ok {
			return kwErr(s, "multipleOf", "must be a number (xgrammar)")
		}
		if r.Sign() <= 0 {
			return kwErr(s, "multipleOf", "must be greater than 0 (xgrammar)")
		}
	}
	return nil
}

func maxInt(a, b *big.Int) *big.Int {
	if a == nil || b.Cmp(a) > 0 {
		return b
	}
	return a
}

func minInt(a, b *big.Int) *big.Int {
	if a == nil || b.Cmp(a) < 0 {
		return b
	}
	return a
}

func (x *xgChecker) number(s *jv) error {
	var lo, hi *big.Rat
	var loExcl, hiExcl bool
	for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		r, ok := new(big.Rat).SetString(v.text)
		if v.kind != jNumber || !ok {
			return kwErr(s, kw, "must be a number (xgrammar)")
		}
		switch kw {
		case "multipleOf":
			if r.Sign() <= 0 {
				return kwErr(s, kw, "must be greater than 0 (xgrammar)")
			}
		case "minimum", "exclusiveMinimum":
			if lo == nil || r.Cmp(lo) > 0 || r.Cmp(lo) == 0 && kw == "exclusiveMinimum" {
				lo, loExcl = r, kw == "exclusiveMinimum"
			}
		default:
			if hi == nil || r.Cmp(hi) < 0 || r.Cmp(hi) == 0 && kw == "exclusiveMaximum" {
				hi, hiExcl = r, kw == "exclusiveMaximum"
			}
		}
	}
	if lo != nil && hi != nil {
		if c := lo.Cmp(hi); c > 0 || c == 0 && (loExcl || hiExcl) {
			return kwErr(s, "minimum", "the range is empty (xgrammar)")
		}
	}
	return nil
}

func (x *xgChecker) string(s *jv) error {
	for _, kw := range []string{"format", "pattern"} {
		if v := s.get(kw); v != nil && v.kind != jString {
			return kwErr(s, kw, "must be a string (xgrammar)")
		}
	}
	if p := s.get("pattern"); p != nil {
		if _, err := syntax.Parse(ecmaToRE2(p.text), syntax.Perl); err != nil {
			return kwErr(s, "pattern", "%q is not a regular expression xgrammar reads: %v", p.text, err)
		}
	}
	lo, hi := int64(0), int64(-1)
	for _, kw := range []string{"minLength", "maxLength"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		n, ok := xgInt(v)
		if !ok {
			return kwErr(s, kw, "must be an integer (xgrammar)")
		}
		if kw == "minLength" {
			lo = n.Int64()
		} else {
			hi = n.Int64()
		}
	}
	if hi >= 0 && lo > hi {
		return kwErr(s, "minLength", "is greater than maxLength (xgrammar)")
	}
	return nil
}

func (x *xgChecker) array(s *jv) error {
	prefix := 0
	if p := s.get("prefixItems"); p != nil {
		if p.kind != jArray {
			return kwErr(s, "prefixItems", "must be an array (xgrammar)")
		}
		for _, it := range p.arr {
			if it.kind != jObject && it.kind != jBool {
				return kwErr(s, "prefixItems", "must be an array of objects or booleans (xgrammar)")
			}
			if err := x.check(it); err != nil {
				return err
			}
		}
		prefix = len(p.arr)
	}
	additional := true
	if it := s.get("items"); it != nil {
		switch {
		case it.kind == jBool:
			additional = it.b
		case it.kind == jObject:
			if err := x.check(it); err != nil {
				return err
			}
		default:
			return kwErr(s, "items", "must be a boolean or an object (xgrammar)")
		}
	} else if u := s.get("unevaluatedItems"); u != nil {
		switch {
		case u.kind == jBool:
			additional = u.b
		case u.kind == jObject:
			if err := x.check(u); err != nil {
				return err
			}
		default:
			return kwErr(s, "unevaluatedItems", "must be a boolean or an object (xgrammar)")
		}
	}
	lo, hi := int64(0), int64(-1)
	for _, kw := range []string{"minItems", "minContains", "maxItems"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		n, ok := xgInt(v)
		if !ok || kw == "maxItems" && n.Sign() < 0 {
			return kwErr(s, kw, "must be a non-negative integer (xgrammar)")
		}
		if kw == "maxItems" {
			hi = n.Int64()
		} else {
			lo = max(lo, n.Int64())
		}
	}
	switch {
	case hi >= 0 && lo > hi:
		return kwErr(s, "minItems", "is greater than maxItems (xgrammar)")
	case hi >= 0 && hi < int64(prefix):
		return kwErr(s, "maxItems", "is less than the prefixItems (xgrammar)")
	case !additional && int64(prefix) < lo:
		return kwErr(s, "minItems", "is more than the prefixItems, and no other item is allowed (xgrammar)")
	}
	return nil
}

func (x *xgChecker) object(s *jv) error {
	nprops := 0
	for _, kw := range []string{"properties", "patternProperties"} {
		p := s.get(kw)
		if p == nil {
			continue
		}
		if p.kind != jObject {
			return kwErr(s, kw, "must be an object (xgrammar)")
		}
		for _, m := range p.obj {
			if err := x.check(m.v); err != nil {
				return err
			}
		}
		if kw == "properties" {
			nprops = len(p.obj)
		}
	}
	nreq := 0
	if r := s.get("required"); r != nil {
		if r.kind != jArray {
			return kwErr(s, "required", "must be an array (xgrammar)")
		}
		for _, k := range r.arr {
			if k.kind != jString {
				return kwErr(s, "required", "must be an array of strings (xgrammar)")
			}
		}
		nreq = len(r.arr)
	}
	if pn := s.get("propertyNames"); pn != nil {
		if pn.kind != jObject {
			return kwErr(s, "propertyNames", "must be an object (xgrammar)")
		}
		if t := pn.get("type"); t != nil && t.kind == jString && t.text != "string" {
			return kwErr(s, "propertyNames", "must validate strings (xgrammar)")
		}
		if err := x.check(pn); err != nil {
			return err
		}
	}
	open := false // MLC compiles schemas in xgrammar's strict mode
	if a := s.get("additionalProperties"); a != nil {
		if a.kind == jBool {
			open = a.b
		} else if err := x.check(a); err != nil {
			return err
		}
	} else if u := s.get("unevaluatedProperties"); u != nil {
		if u.kind == jBool {
			open = u.b
		} else if err := x.check(u); err != nil {
			return err
		}
	}
	lo, hi := int64(0), int64(-1)
	for _, kw := range []string{"minProperties", "maxProperties"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		n, ok := xgInt(v)
		if !ok || n.Sign() < 0 {
			return kwErr(s, kw, "must be a non-negative integer (xgrammar)")
		}
		if kw == "minProperties" {
			lo = n.Int64()
		} else {
			hi = n.Int64()
		}
	}
	switch {
	case hi >= 0 && lo > hi:
		return kwErr(s, "minProperties", "is greater than maxProperties (xgrammar)")
	case hi >= 0 && int64(nreq) > hi:
		return kwErr(s, "maxProperties", "is less than the required properties (xgrammar)")
	case !open && s.get("patternProperties") == nil && s.get("propertyNames") == nil && lo > int64(nprops):
		return kwErr(s, "minProperties", "is more than the properties, and no other is allowed (xgrammar)")
	}
	return nil
}
