package jsongrammar

// The compiler checks a schema's enum and const values against the rest
// of their conjunction (an enum beside a pattern, a const under a
// property's type), so that the literals it generates validate: a small
// validator of JSON values, over the keywords the compiler reads.

// maxAdmitDepth bounds the nesting the validator follows; a deeper value
// is taken as not admitted (the literal is left out: never invalid).
const maxAdmitDepth = 32

// admits reports whether value v satisfies every schema of set.
func (c *compiler) admits(v *jv, set []celem, depth int) (bool, error) {
	if depth > maxAdmitDepth {
		return false, nil
	}
	flat, ok, err := c.flatten(set)
	if err != nil || !ok {
		return false, err
	}
	for _, e := range flat {
		if ok, err := c.admitsOne(v, e, depth); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (c *compiler) admitsSchema(v, s *jv, depth int) (bool, error) {
	return c.admits(v, []celem{whole(s)}, depth+1)
}

func (c *compiler) admitsOne(v *jv, e celem, depth int) (bool, error) {
	s := e.s
	if !c.bud.spend(len(s.obj)) {
		return false, budgetError()
	}
	for _, kw := range []struct {
		name string
		bit  uint8
	}{{"anyOf", skipAnyOf}, {"oneOf", skipOneOf}} {
		subs := s.get(kw.name)
		if subs == nil || e.skip&kw.bit != 0 || subs.kind != jArray {
			continue
		}
		n := 0
		for _, sub := range subs.arr {
			ok, err := c.admitsSchema(v, sub, depth)
			if err != nil {
				return false, err
			}
			if ok {
				n++
			}
		}
		if n == 0 || kw.name == "oneOf" && n > 1 {
			return false, nil
		}
	}
	if s.get("type") != nil {
		ts, err := schemaTypes(s)
		if err != nil {
			return false, err
		}
		if ts&valueType(v) == 0 {
			return false, nil
		}
	}
	if x := s.get("const"); x != nil && !sameValue(v, x) {
		return false, nil
	}
	if x := s.get("enum"); x != nil && x.kind == jArray {
		found := false
		for _, y := range x.arr {
			found = found || sameValue(v, y)
		}
		if !found {
			return false, nil
		}
	}
	switch v.kind {
	case jString:
		return c.admitsString(v, s)
	case jArray:
		return c.admitsArray(v, s, depth)
	case jObject:
		return c.admitsObject(v, s, depth)
	}
	return true, nil
}

func (c *compiler) admitsString(v, s *jv) (bool, error) {
	if p := s.get("pattern"); p != nil && p.kind == jString {
		d, err := c.pattern(p.text)
		if err != nil {
			return false, kwErr(s, "pattern", "%v", err)
		}
		if !d.matches(v.text) {
			return false, nil
		}
	}
	return true, nil
}

func (c *compiler) admitsArray(v, s *jv, depth int) (bool, error) {
	if n, ok := count(s.get("minItems")); ok && len(v.arr) < n {
		return false, nil
	}
	if n, ok := count(s.get("maxItems")); ok && len(v.arr) > n {
		return false, nil
	}
	if it := s.get("items"); it != nil {
		for _, x := range v.arr {
			if ok, err := c.admitsSchema(x, it, depth); err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

func (c *compiler) admitsObject(v, s *jv, depth int) (bool, error) {
	if r := s.get("required"); r != nil && r.kind == jArray {
		for _, k := range r.arr {
			if v.get(k.text) == nil {
				return false, nil
			}
		}
	}
	props := s.get("properties")
	addl := s.get("additionalProperties")
	for _, m := range v.obj {
		sub := props.get(m.k)
		if sub == nil {
			sub = addl
		}
		if sub == nil {
			continue
		}
		if ok, err := c.admitsSchema(m.v, sub, depth); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// sameValue reports whether two JSON values are equal as JSON Schema
// compares them: numbers by value, objects whatever their members' order.
func sameValue(a, b *jv) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case jNull:
		return true
	case jBool:
		return a.b == b.b
	case jString:
		return a.text == b.text
	case jNumber:
		na, da, e1 := parseDecimal(a.text)
		nb, db, e2 := parseDecimal(b.text)
		return e1 == nil && e2 == nil && na == nb && da == db
	case jArray:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !sameValue(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	}
	if len(a.obj) != len(b.obj) {
		return false
	}
	for _, m := range a.obj {
		x := b.get(m.k)
		if x == nil || !sameValue(m.v, x) {
			return false
		}
	}
	return true
}
