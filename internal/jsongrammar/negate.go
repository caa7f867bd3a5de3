package jsongrammar

import "strconv"

// not, if/then/else and dependentSchemas are honoured through
// negation: the compiler writes the schema of the values a schema does
// not admit, where it can, as a schema of its own (a synthesized jv,
// with NUL-prefixed keywords for what JSON Schema cannot say: a value
// none of these, a property absent, a string not matching). A schema is
// a conjunction of its keywords, so its negation is the alternatives of
// their negations; a keyword of one type passes the values of the
// others, so its negation is of its type: not {type: string,
// minLength: 3} is a value of another type, or a string of at most 2
// characters. A keyword whose negation the compiler cannot write (oneOf,
// multipleOf, a format, the object and array keywords past properties
// and items) is a 400 that names it.

// synth makes a schema object of members (key, value) pairs.
func (c *compiler) synth(at *jv, members ...jmember) *jv {
	c.synthID++
	return &jv{kind: jObject, obj: members, id: c.synthID, ptr: at.ptr, base: at.base, neg: c.negating > 0}
}

func (c *compiler) synthValue(kind jkind, text string) *jv {
	c.synthID++
	return &jv{kind: kind, text: text, id: c.synthID}
}

func (c *compiler) synthArray(xs ...*jv) *jv {
	c.synthID++
	return &jv{kind: jArray, arr: xs, id: c.synthID}
}

func (c *compiler) synthBool(b bool) *jv {
	c.synthID++
	return &jv{kind: jBool, b: b, id: c.synthID}
}

// typesExcept is a type keyword's value: every type but ts's.
func (c *compiler) typesExcept(ts typeSet) *jv {
	var names []*jv
	for _, t := range []struct {
		name string
		set  typeSet
	}{{"null", tNull}, {"boolean", tBool}, {"object", tObject}, {"array", tArray}, {"string", tString}, {"number", tNum | tInt}} {
		if ts&t.set == 0 {
			names = append(names, c.synthValue(jString, t.name))
		}
	}
	return c.synthArray(names...)
}

// negate returns the schema of the values s does not admit.
func (c *compiler) negate(s *jv) (neg *jv, err error) {
	if s.kind == jBool {
		return c.synthBool(!s.b), nil
	}
	if err := c.negFailed[s.id]; err != nil {
		return nil, err
	}
	if n, ok := c.negations[s.id]; ok {
		return n, nil
	}
	c.negating++
	out := c.synth(s) // filled below; a recursion meets it
	c.negations[s.id] = out
	mark := len(c.negLog)
	c.negLog = append(c.negLog, s.id)
	defer func() {
		c.negating--
		if err != nil {
			// What was written since refers to out, which is not whole.
			for _, id := range c.negLog[mark:] {
				delete(c.negations, id)
			}
			c.negLog = c.negLog[:mark]
			c.negFailed[s.id] = err
		}
	}()
	if !c.bud.spend(len(s.obj) + 1) {
		return nil, budgetError()
	}
	var cases []*jv
	add := func(members ...jmember) { cases = append(cases, c.synth(s, members...)) }
	other := func(t typeSet) { add(jmember{"type", c.typesExcept(t)}) }
	typed := func(t string, members ...jmember) {
		add(append([]jmember{{"type", c.synthValue(jString, t)}}, members...)...)
	}
	num := func(n int) *jv { return c.synthValue(jNumber, strconv.Itoa(n)) }
	for _, m := range s.obj {
		v := m.v
		switch m.k {
		case "$ref":
			t, err := c.d.resolve(s, v.text)
			if err != nil {
				return nil, kwErr(s, "$ref", "%v", err)
			}
			n, err := c.negate(t)
			if err != nil {
				return nil, err
			}
			cases = append(cases, n)
		case "allOf":
			for _, x := range v.arrOf() {
				n, err := c.negate(x)
				if err != nil {
					return nil, err
				}
				cases = append(cases, n)
			}
		case "anyOf":
			var all []*jv
			for _, x := range v.arrOf() {
				n, err := c.negate(x)
				if err != nil {
					return nil, err
				}
				all = append(all, n)
			}
			add(jmember{"allOf", c.synthArray(all...)})
		case "not":
			cases = append(cases, v)
		case "if":
			for _, branch := range []string{"then", "else"} {
				b := s.get(branch)
				if b == nil {
					continue
				}
				nb, err := c.negate(b)
				if err != nil {
					return nil, err
				}
				cond := v
				if branch == "else" {
					if cond, err = c.negate(v); err != nil {
						return nil, err
					}
				}
				add(jmember{"allOf", c.synthArray(cond, nb)})
			}
		case "type":
			ts, err := schemaTypes(s)
			if err != nil {
				return nil, err
			}
			other(ts)
		case "const", "enum":
			vals := []*jv{v}
			if m.k == "enum" {
				vals = v.arrOf()
			}
			for _, x := range vals {
				if x.kind == jObject || x.kind == jArray {
					return nil, kwErr(s, m.k, "is not served under not (of an object or array value)")
				}
			}
			add(jmember{kwNotIn, c.synthArray(vals...)})
		case "pattern":
			typed("string", jmember{kwNotPattern, v})
		case kwNotPattern:
			typed("string", jmember{"pattern", v})
		case kwNotIn:
			add(jmember{"enum", v})
		case kwAbsent:
			for _, k := range v.arrOf() {
				typed("object", jmember{"required", c.synthArray(k)})
			}
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
			n, ok := count(v)
			if !ok {
				return nil, kwErr(s, m.k, "must be a non-negative integer")
			}
			t, opposite := map[string]string{"minLength": "string", "maxLength": "string", "minItems": "array",
				"maxItems": "array", "minProperties": "object", "maxProperties": "object"}[m.k],
				map[string]string{"minLength": "maxLength", "maxLength": "minLength", "minItems": "maxItems",
					"maxItems": "minItems", "minProperties": "maxProperties", "maxProperties": "minProperties"}[m.k]
			switch {
			case m.k[:3] == "max":
				typed(t, jmember{opposite, num(n + 1)})
			case n > 0:
				typed(t, jmember{opposite, num(n - 1)})
			}
		case "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum":
			if v.kind != jNumber {
				continue // draft 4's flag: read with its bound
			}
			excl := m.k[:3] == "exc" || s.get("exclusive"+upper(m.k)).isTrue()
			low := m.k == "minimum" || m.k == "exclusiveMinimum"
			var kw string
			switch {
			case low && excl:
				kw = "maximum"
			case low:
				kw = "exclusiveMaximum"
			case excl:
				kw = "minimum"
			default:
				kw = "exclusiveMinimum"
			}
			typed("number", jmember{kw, v})
		case "required":
			for _, k := range v.arrOf() {
				typed("object", jmember{kwAbsent, c.synthArray(k)})
			}
		case "properties":
			for _, p := range v.obj {
				n, err := c.negate(p.v)
				if err != nil {
					return nil, err
				}
				typed("object", jmember{"required", c.synthArray(c.synthValue(jString, p.k))},
					jmember{"properties", c.synth(s, jmember{p.k, n})})
			}
		case "items":
			if v.kind == jArray {
				return nil, kwErr(s, "items", "as a list is not served under not")
			}
			n, err := c.negate(v)
			if err != nil {
				return nil, err
			}
			typed("array", jmember{"contains", n})
		case "format":
			if _, _, known := stringFormat(v.text); known || isNumberFormat(v.text) {
				return nil, kwErr(s, "format", "is not served under not")
			}
		case "then", "else", "$defs", "definitions":
		default:
			if constrains(m.k) {
				return nil, kwErr(s, m.k, "is not served under not (nor in if, nor in oneOf's alternatives that may overlap)")
			}
		}
	}
	switch len(cases) {
	case 0:
		out.kind, out.b = jBool, false
	case 1:
		id := out.id
		*out = *cases[0]
		out.id, out.neg = id, true
	default:
		out.obj = []jmember{{"anyOf", c.synthArray(cases...)}}
	}
	return out, nil
}

// upper is k's first letter upper-cased (minimum: Minimum).
func upper(k string) string { return string(k[0]-'a'+'A') + k[1:] }

// isTrue reports whether v is the JSON true.
func (v *jv) isTrue() bool { return v != nil && v.kind == jBool && v.b }

// constrains reports whether keyword k may constrain a value: the
// keywords of the JSON Schema drafts (4 to 2020-12) that assert. Any
// other is an annotation, or unknown, and passes (as validators pass
// them).
func constrains(k string) bool {
	switch k {
	case "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "format", "items", "prefixItems", "additionalItems", "maxItems",
		"minItems", "uniqueItems", "contains", "maxContains", "minContains", "unevaluatedItems", "maxProperties",
		"minProperties", "required", "properties", "patternProperties", "additionalProperties",
		"dependentRequired", "dependentSchemas", "dependencies", "propertyNames", "unevaluatedProperties",
		"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
		kwNotIn, kwAbsent, kwNotPattern:
		return true
	}
	return false
}
