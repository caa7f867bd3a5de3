package jsongrammar

import (
	"unicode/utf8"
)

// The compiler checks a schema's enum and const values against the rest
// of their conjunction (an enum beside a pattern, a const under a
// property's type), and declared keys against propertyNames, so that
// the literals it generates validate: a small validator of JSON values,
// over the keywords the compiler reads.

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
	if !c.bud.spend(len(s.obj) + 1) {
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
	if cond := s.get("if"); cond != nil && e.skip&skipIf == 0 {
		ok, err := c.admitsSchema(v, cond, depth)
		if err != nil {
			return false, err
		}
		branch := s.get("else")
		if ok {
			branch = s.get("then")
		}
		if branch != nil {
			if ok, err := c.admitsSchema(v, branch, depth); err != nil || !ok {
				return false, err
			}
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
	for _, kw := range []string{"enum", kwNotIn} {
		found := false
		for _, y := range s.get(kw).arrOf() {
			found = found || sameValue(v, y)
		}
		if s.get(kw) != nil && found != (kw == "enum") {
			return false, nil
		}
	}
	switch v.kind {
	case jString:
		return c.admitsString(v, s)
	case jNumber:
		return c.admitsNumber(v, s)
	case jArray:
		return c.admitsArray(v, s, depth)
	case jObject:
		return c.admitsObject(v, s, depth)
	}
	return true, nil
}

func (c *compiler) admitsString(v, s *jv) (bool, error) {
	for _, kw := range []string{"pattern", kwNotPattern} {
		p := s.get(kw)
		if p == nil || p.kind != jString {
			continue
		}
		d, err := c.pattern(p.text)
		if err != nil {
			return false, kwErr(s, kw, "%v", err)
		}
		if d.matches(v.text) != (kw == "pattern") {
			return false, nil
		}
	}
	lo, hi := 0, -1
	if f := s.get("format"); f != nil && f.kind == jString {
		if src, most, ok := stringFormat(f.text); ok {
			d, err := c.pattern(src)
			if err != nil {
				return false, kwErr(s, "format", "%v", err)
			}
			if !d.matches(v.text) {
				return false, nil
			}
			if most > 0 {
				hi = most
			}
		}
	}
	if err := lengths(s, "minLength", "maxLength", &lo, &hi); err != nil {
		return false, err
	}
	n := utf8.RuneCountInString(v.text)
	return n >= lo && (hi < 0 || n <= hi), nil
}

func (c *compiler) admitsNumber(v, s *jv) (bool, error) {
	spec := numSpec{}
	if err := c.numberKeywords(s, &spec); err != nil {
		return false, err
	}
	return numberIn(spec, v.text), nil
}

func (c *compiler) admitsArray(v, s *jv, depth int) (bool, error) {
	lo, hi := 0, -1
	if err := lengths(s, "minItems", "maxItems", &lo, &hi); err != nil {
		return false, err
	}
	if len(v.arr) < lo || hi >= 0 && len(v.arr) > hi {
		return false, nil
	}
	for _, p := range arrParts([]celem{whole(s)}) {
		for i, x := range v.arr {
			sub := p.rest
			if i < len(p.prefix) {
				sub = p.prefix[i]
			}
			if sub == nil {
				continue
			}
			if ok, err := c.admitsSchema(x, sub, depth); err != nil || !ok {
				return false, err
			}
		}
	}
	if s.get("uniqueItems").isTrue() {
		for i := range v.arr {
			for j := range i {
				if sameValue(v.arr[i], v.arr[j]) {
					return false, nil
				}
			}
		}
	}
	if x := s.get("contains"); x != nil {
		n := 0
		for _, item := range v.arr {
			ok, err := c.admitsSchema(item, x, depth)
			if err != nil {
				return false, err
			}
			if ok {
				n++
			}
		}
		least, ok := count(s.get("minContains"))
		if !ok {
			least = 1
		}
		if n < least {
			return false, nil
		}
	}
	return true, nil
}

func (c *compiler) admitsObject(v, s *jv, depth int) (bool, error) {
	for _, k := range s.get("required").arrOf() {
		if v.get(k.text) == nil {
			return false, nil
		}
	}
	for _, k := range s.get(kwAbsent).arrOf() {
		if v.get(k.text) != nil {
			return false, nil
		}
	}
	lo, hi := 0, -1
	if err := lengths(s, "minProperties", "maxProperties", &lo, &hi); err != nil {
		return false, err
	}
	if len(v.obj) < lo || hi >= 0 && len(v.obj) > hi {
		return false, nil
	}
	parts, err := c.objParts([]celem{whole(s)})
	if err != nil {
		return false, err
	}
	for _, m := range v.obj {
		pp, forbidden, err := c.propertyParts(parts, m.k)
		if err != nil || forbidden {
			return false, err
		}
		for _, e := range pp {
			if ok, err := c.admitsSchema(m.v, e.s, depth); err != nil || !ok {
				return false, err
			}
		}
	}
	for _, kw := range []string{"dependentRequired", "dependencies"} {
		for _, m := range s.get(kw).objOf() {
			if v.get(m.k) == nil {
				continue
			}
			if m.v.kind == jArray {
				for _, r := range m.v.arr {
					if v.get(r.text) == nil {
						return false, nil
					}
				}
			} else if ok, err := c.admitsSchema(v, m.v, depth); err != nil || !ok {
				return false, err
			}
		}
	}
	for _, m := range s.get("dependentSchemas").objOf() {
		if v.get(m.k) != nil {
			if ok, err := c.admitsSchema(v, m.v, depth); err != nil || !ok {
				return false, err
			}
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
