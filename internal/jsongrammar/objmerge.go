package jsongrammar

import (
	"encoding/json"
	"slices"
)

// An object of a conjunction: its properties are those any part
// declares (and those required, or named by dependentRequired), in the
// order a reader meets them, each the conjunction of what every part
// says of it (its schema, the patternProperties that match it, else the
// part's additionalProperties); then undeclared members, whose keys are
// none of the declared ones.

// objPart is what one part of a conjunction says of an object's members.
type objPart struct {
	s        *jv
	props    *jv       // properties whose schemas apply
	patterns []patProp // patternProperties whose schemas apply
	addl     *jv       // additionalProperties, or unevaluatedProperties (nil: none)
	closed   bool      // addl is false
	names    *jv       // propertyNames
	// seen reports whether key k is declared or matched where addl
	// looks (for unevaluatedProperties: anywhere in the part's subtree).
	seen func(k string) bool
}

type patProp struct {
	d *cdfa
	s *jv
}

// maxDependencies bounds the properties dependentRequired relates.
const maxDependencies = 30

// objParts reads the object keywords of each part of set.
func (c *compiler) objParts(set []celem) ([]objPart, error) {
	var out []objPart
	patternsOf := func(s *jv) ([]patProp, error) {
		pp := s.get("patternProperties")
		if pp == nil {
			return nil, nil
		}
		if pp.kind != jObject {
			return nil, kwErr(s, "patternProperties", "must be an object")
		}
		var ps []patProp
		for _, m := range pp.obj {
			d, err := c.pattern(m.k)
			if err != nil {
				return nil, kwErr(s, "patternProperties", "%v", err)
			}
			ps = append(ps, patProp{d, m.v})
		}
		return ps, nil
	}
	for i, e := range set {
		s := e.s
		if p := s.get("properties"); p != nil && p.kind != jObject {
			return nil, kwErr(s, "properties", "must be an object")
		}
		pats, err := patternsOf(s)
		if err != nil {
			return nil, err
		}
		p := objPart{s: s, props: s.get("properties"), patterns: pats, addl: s.get("additionalProperties"), names: s.get("propertyNames")}
		p.seen = func(k string) bool { return declaresOrMatches(p.props, p.patterns, k) }
		if p.addl == nil {
			if u := s.get("unevaluatedProperties"); u != nil {
				// What the part's subtree (its $ref, allOf, alternative
				// chosen) evaluates is not unevaluated.
				p.addl = u
				var props []*jv
				var all []patProp
				for j := range set {
					if !derives(set, j, i) {
						continue
					}
					props = append(props, set[j].s.get("properties"))
					more, err := patternsOf(set[j].s)
					if err != nil {
						return nil, err
					}
					all = append(all, more...)
				}
				p.seen = func(k string) bool {
					for _, ps := range props {
						if declaresOrMatches(ps, all, k) {
							return true
						}
					}
					return false
				}
			}
		}
		p.closed = p.addl != nil && p.addl.kind == jBool && !p.addl.b
		if p.props != nil || p.patterns != nil || p.addl != nil || p.names != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// derives reports whether element j of set was brought in by element i,
// directly or not (or is it), and not through a negation (whose
// annotations do not count).
func derives(set []celem, j, i int) bool {
	for k := j; k >= 0; k = int(set[k].from) {
		if k == i {
			return true
		}
		if set[k].s.neg {
			return false
		}
	}
	return false
}

func declaresOrMatches(props *jv, pats []patProp, k string) bool {
	if props.get(k) != nil {
		return true
	}
	for _, p := range pats {
		if p.d.matches(k) {
			return true
		}
	}
	return false
}

// object compiles the object of a conjunction.
func (c *compiler) object(set []celem) (int32, error) {
	parts, err := c.objParts(set)
	if err != nil {
		return 0, err
	}
	names, required, err := c.objNames(set)
	if err != nil {
		return 0, err
	}
	absent := map[string]bool{}
	for _, e := range set {
		for _, x := range e.s.get(kwAbsent).arrOf() {
			absent[x.text] = true
		}
	}
	o := &objNode{maxProps: -1}
	for _, e := range set {
		if err := lengths(e.s, "minProperties", "maxProperties", &o.minProps, &o.maxProps); err != nil {
			return 0, err
		}
	}
	if !c.bud.spend(len(names) * (len(parts) + 1)) {
		return 0, budgetError()
	}
	index := map[string]int32{}
	for _, k := range names {
		pparts, forbidden, err := c.propertyParts(parts, k)
		if err != nil {
			return 0, err
		}
		if forbidden || absent[k] {
			if required[k] {
				return c.none(), nil
			}
			continue
		}
		val, err := c.value(pparts)
		if err != nil {
			return 0, err
		}
		index[k] = int32(len(o.props))
		o.props = append(o.props, prop{name: k, val: val, required: required[k]})
	}
	if err := c.dependencies(set, o, index); err != nil {
		return 0, err
	}
	var taken []string // declared or absent: no undeclared key is one
	taken = append(taken, names...)
	for k := range absent {
		taken = append(taken, k)
	}
	slices.Sort(taken[len(names):])
	if err := c.objExtras(parts, o, names, taken); err != nil {
		return 0, err
	}
	nreq := 0
	for _, p := range o.props {
		if p.required {
			nreq++
		}
	}
	if o.maxProps >= 0 && nreq > o.maxProps || o.minProps > len(o.props) && len(o.extras) == 0 ||
		o.maxProps >= 0 && o.maxProps < o.minProps {
		return c.none(), nil
	}
	for _, p := range parts {
		if p.closed && len(p.patterns) == 0 {
			o.closed = true
		}
	}
	o.finish()
	return c.add(node{kind: kObject, obj: o}), nil
}

// arrOf is an array's items (none for another value or nil).
func (v *jv) arrOf() []*jv {
	if v == nil || v.kind != jArray {
		return nil
	}
	return v.arr
}

// objNames are the properties of a conjunction in the order a reader
// meets them (a schema's $ref and allOf before its own), then those only
// required or named by dependencies; and the required ones.
func (c *compiler) objNames(set []celem) ([]string, map[string]bool, error) {
	var names []string
	index := map[string]bool{}
	required := map[string]bool{}
	declare := func(k string) {
		if !index[k] {
			index[k] = true
			names = append(names, k)
		}
	}
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
		for _, x := range s.get("allOf").arrOf() {
			if err := visit(x); err != nil {
				return err
			}
		}
		if p := s.get("properties"); p != nil {
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
			return nil, nil, err
		}
	}
	for _, e := range set {
		for _, x := range e.s.get("required").arrOf() {
			declare(x.text)
		}
		for _, kw := range []string{"dependentRequired", "dependencies"} {
			for _, m := range e.s.get(kw).objOf() {
				if m.v.kind == jArray {
					declare(m.k)
					for _, x := range m.v.arr {
						if x.kind == jString {
							declare(x.text)
						}
					}
				}
			}
		}
	}
	return names, required, nil
}

// objOf is an object's members (none for another value or nil).
func (v *jv) objOf() []jmember {
	if v == nil || v.kind != jObject {
		return nil
	}
	return v.obj
}

// propertyParts is what each part says of property k; forbidden when a
// part admits no such property (additionalProperties false, or a
// propertyNames that k fails).
func (c *compiler) propertyParts(parts []objPart, k string) (out []celem, forbidden bool, err error) {
	for _, p := range parts {
		if d := p.props.get(k); d != nil {
			out = append(out, whole(d))
		}
		for _, pp := range p.patterns {
			if pp.d.matches(k) {
				out = append(out, whole(pp.s))
			}
		}
		if !p.seen(k) {
			switch {
			case p.closed:
				return nil, true, nil
			case p.addl != nil && p.addl.kind == jObject:
				out = append(out, whole(p.addl))
			}
		}
		if p.names != nil {
			ok, err := c.admitsSchema(&jv{kind: jString, text: k, id: -1}, p.names, 0)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				return nil, true, nil
			}
		}
	}
	return out, false, nil
}

// dependencies reads dependentRequired (and draft 7's dependencies of
// names): a property that requires another gets it after it, or only
// after it was chosen.
func (c *compiler) dependencies(set []celem, o *objNode, index map[string]int32) error {
	o.deps = make([][]int32, len(o.props))
	o.bit = make([]int8, len(o.props))
	for j := range o.bit {
		o.bit[j] = -1
	}
	bits := 0
	bitOf := func(s *jv, kw string, j int32) error {
		if o.bit[j] >= 0 {
			return nil
		}
		if bits == maxDependencies {
			return kwErr(s, kw, "relates more than %d properties (served up to that)", maxDependencies)
		}
		o.bit[j] = int8(bits)
		bits++
		return nil
	}
	for _, e := range set {
		s := e.s
		for _, kw := range []string{"dependentRequired", "dependencies"} {
			for _, m := range s.get(kw).objOf() {
				if m.v.kind != jArray {
					continue // a schema: dependentSchemas' business
				}
				j, ok := index[m.k]
				if !ok {
					continue // the property cannot appear
				}
				for _, x := range m.v.arr {
					r, ok := index[x.text]
					if x.kind != jString {
						return kwErr(s, kw, "must map names to lists of names")
					}
					if !ok {
						// It requires a property that cannot appear: so
						// can it not (a required one: no object can).
						o.props[j].val = c.none()
						continue
					}
					if err := bitOf(s, kw, j); err != nil {
						return err
					}
					if err := bitOf(s, kw, r); err != nil {
						return err
					}
					o.deps[j] = append(o.deps[j], r)
				}
			}
		}
	}
	return nil
}

// objExtras adds the undeclared members an object may have: where a
// part gives additionalProperties a schema or patternProperties, where
// no property is declared, or where minProperties needs more members
// than are declared. Their keys are none of the declared ones, pass
// every propertyNames, and each pattern's are its own (a key two
// patterns match is not written). One part at most may constrain them
// (patternProperties, additionalProperties); past that, no undeclared
// member is written.
func (c *compiler) objExtras(parts []objPart, o *objNode, names, taken []string) error {
	want := len(names) == 0 || o.minProps > len(o.props)
	var shaper *objPart
	for i := range parts {
		p := &parts[i]
		if p.addl != nil && p.addl.kind == jObject || len(p.patterns) > 0 {
			want = true
		}
		if p.addl != nil && !(p.addl.kind == jBool && p.addl.b) || len(p.patterns) > 0 {
			if shaper != nil {
				return nil
			}
			shaper = p
		}
	}
	if !want {
		return nil
	}
	key := strSpec{d: charset(generatable()), hi: -1}
	if len(taken) > 0 {
		key.d = literals(taken).complement()
	}
	for _, p := range parts {
		if p.names == nil {
			continue
		}
		flat, ok, err := c.flatten([]celem{whole(p.names)})
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		for _, e := range flat {
			for _, kw := range []string{"anyOf", "oneOf", "not", "if"} {
				if e.s.get(kw) != nil {
					return kwErr(e.s, kw, "is not served in propertyNames")
				}
			}
		}
		ns, err := c.stringSpec(flat, true)
		if err != nil {
			return err
		}
		if key.d, ok = intersect(key.d, ns.d, c.bud); !ok {
			return kwErr(p.s, "propertyNames", "%v", errTooBig)
		}
		key.lo = max(key.lo, ns.lo)
		if ns.hi >= 0 && (key.hi < 0 || ns.hi < key.hi) {
			key.hi = ns.hi
		}
	}
	group := func(k strSpec, val *jv) error {
		kn, err := c.stringNode(k)
		if err != nil {
			return err
		}
		if val != nil && val.kind == jBool && !val.b {
			return nil // no key of the group may appear
		}
		v := c.any()
		if val != nil && val.kind != jBool {
			if v, err = c.value([]celem{whole(val)}); err != nil {
				return err
			}
		}
		// A few keys are optional properties: each written once, one way.
		var keys []string
		if sn := c.nodes[kn].str; sn != nil && sn.max >= 0 && enumerateString(sn, 0, nil, maxUniqueLiterals, &keys) && len(keys) <= maxUniqueLiterals {
			for _, k := range keys {
				var name string
				_ = json.Unmarshal([]byte(k), &name)
				o.props = append(o.props, prop{name: name, val: v})
				o.deps = append(o.deps, nil)
				o.bit = append(o.bit, -1)
			}
			return nil
		}
		o.extras = append(o.extras, extra{key: kn, val: v})
		return nil
	}
	if shaper == nil {
		if err := group(key, nil); err != nil {
			return err
		}
	} else {
		for i, pp := range shaper.patterns {
			k := key
			var ok bool
			if k.d, ok = intersect(k.d, pp.d, c.bud); !ok {
				return kwErr(shaper.s, "patternProperties", "%v", errTooBig)
			}
			for j, other := range shaper.patterns {
				if j != i {
					if k.d, ok = intersect(k.d, other.d.complement(), c.bud); !ok {
						return kwErr(shaper.s, "patternProperties", "%v", errTooBig)
					}
				}
			}
			if err := group(k, pp.s); err != nil {
				return err
			}
		}
		if !shaper.closed {
			k := key
			for _, other := range shaper.patterns {
				var ok bool
				if k.d, ok = intersect(k.d, other.d.complement(), c.bud); !ok {
					return kwErr(shaper.s, "patternProperties", "%v", errTooBig)
				}
			}
			if err := group(k, shaper.addl); err != nil {
				return err
			}
		}
	}
	if c.bounds.Items > 0 && len(o.extras) > 0 {
		most := max(len(o.props)+c.bounds.Items, o.minProps)
		if o.maxProps < 0 || most < o.maxProps {
			o.maxProps = most
		}
	}
	return nil
}
