package jsongrammar

import (
	"math/big"
	"slices"
)

// Keywords of the schemas the compiler synthesizes (negations): they
// cannot be written in a schema's JSON text as they begin with a NUL.
const (
	kwNotIn      = "\x00notIn"      // the value is none of these
	kwAbsent     = "\x00absent"     // the object has none of these properties
	kwNotPattern = "\x00notPattern" // the string does not match this pattern
)

// count reads a non-negative integer keyword.
func count(v *jv) (int, bool) {
	if v == nil || v.kind != jNumber {
		return 0, false
	}
	neg, d, err := parseDecimal(v.text)
	if err != nil || neg || d.f != "" || len(d.i) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(d.i); i++ {
		n = n*10 + int(d.i[i]-'0')
	}
	return n, true
}

// counts reads keyword k of s as a count: false when absent; an error
// when not one.
func counts(s *jv, k string) (int, bool, error) {
	v := s.get(k)
	if v == nil {
		return 0, false, nil
	}
	n, ok := count(v)
	if !ok {
		return 0, false, kwErr(s, k, "must be a non-negative integer")
	}
	return n, true, nil
}

// lengths narrows [lo, hi] (hi -1: none) by keywords min and max of s.
func lengths(s *jv, min, max string, lo, hi *int) error {
	if n, ok, err := counts(s, min); err != nil {
		return err
	} else if ok && n > *lo {
		*lo = n
	}
	if n, ok, err := counts(s, max); err != nil {
		return err
	} else if ok && (*hi < 0 || n < *hi) {
		*hi = n
	}
	return nil
}

// excluded are the values of the \x00notIn keywords of set.
func excluded(set []celem) []*jv {
	var out []*jv
	for _, e := range set {
		if v := e.s.get(kwNotIn); v != nil {
			out = append(out, v.arr...)
		}
	}
	return out
}

// strSpec is what a conjunction says of a string: its automaton and
// its lengths (hi -1: none).
type strSpec struct {
	d      *cdfa
	lo, hi int
	format bool // a format's pattern is in d
}

// stringSpec merges the string keywords of set: patterns and formats
// intersected, lengths narrowed, the strings excluded taken out; with
// enums, also the enum and const values that are strings (for
// propertyNames, whose values are keys).
func (c *compiler) stringSpec(set []celem, enums bool) (strSpec, error) {
	sp := strSpec{d: charset(generatable()), hi: -1}
	and := func(s *jv, kw string, x *cdfa) error {
		var ok bool
		if sp.d, ok = intersect(sp.d, x, c.bud); !ok {
			return kwErr(s, kw, "%v", errTooBig)
		}
		return nil
	}
	for _, e := range set {
		s := e.s
		for _, kw := range []string{"pattern", kwNotPattern} {
			p := s.get(kw)
			if p == nil {
				continue
			}
			if p.kind != jString {
				return sp, kwErr(s, kw, "must be a string")
			}
			pd, err := c.pattern(p.text)
			if err != nil {
				return sp, kwErr(s, kw, "%v", err)
			}
			if kw == kwNotPattern {
				pd = pd.complement()
			}
			if err := and(s, "pattern", pd); err != nil {
				return sp, err
			}
		}
		if f := s.get("format"); f != nil && f.kind == jString {
			if src, most, ok := stringFormat(f.text); ok {
				fd, err := c.pattern(src)
				if err != nil {
					return sp, kwErr(s, "format", "%v", err)
				}
				if err := and(s, "format", fd); err != nil {
					return sp, err
				}
				sp.format = true
				if most > 0 && (sp.hi < 0 || most < sp.hi) {
					sp.hi = most
				}
			}
		}
		if err := lengths(s, "minLength", "maxLength", &sp.lo, &sp.hi); err != nil {
			return sp, err
		}
		for _, kw := range []string{"enum", "const"} {
			v := s.get(kw)
			if !enums || v == nil {
				continue
			}
			vals := []*jv{v}
			if kw == "enum" {
				vals = v.arr
			}
			var strs []string
			for _, x := range vals {
				if x.kind == jString {
					strs = append(strs, x.text)
				}
			}
			if err := and(s, kw, literals(strs)); err != nil {
				return sp, err
			}
		}
	}
	var out []string
	for _, v := range excluded(set) {
		if v.kind == jString {
			out = append(out, v.text)
		}
	}
	if len(out) > 0 {
		if err := and(set[0].s, "not", literals(out).complement()); err != nil {
			return sp, err
		}
	}
	return sp, nil
}

// string compiles the string of a conjunction.
func (c *compiler) string(set []celem) (int32, error) {
	sp, err := c.stringSpec(set, false)
	if err != nil {
		return 0, err
	}
	return c.stringNode(sp)
}

// stringNode adds the node of the strings of sp, within the bounds.
func (c *compiler) stringNode(sp strSpec) (int32, error) {
	sn, err := newStrNode(sp.d, sp.lo, sp.hi, c.bounds.String, c.bud)
	if err != nil {
		se := &SchemaError{Keyword: "pattern", Msg: err.Error()}
		if b, ok := err.(*boundError); ok {
			se.Bound = b.bound
		}
		return 0, se
	}
	if sn.universal && sn.min == 0 && sn.max == c.stringCap() {
		return c.anyString(), nil
	}
	return c.add(node{kind: kString, str: sn, partial: sp.format}), nil
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

// maxMultiple bounds a multipleOf's digits (its numerator at its scale).
const maxMultiple = 1 << 20

// numberOf compiles the number of a conjunction: its bounds and
// multiples merged, less the values excluded (a range on each side).
func (c *compiler) numberOf(set []celem, integer bool) (int32, error) {
	spec := numSpec{integer: integer}
	for _, e := range set {
		if err := c.numberKeywords(e.s, &spec); err != nil {
			return 0, err
		}
	}
	if spec.lo.set && spec.hi.set {
		if cmp := cmpSigned(spec.lo.neg, spec.lo.d, spec.hi.neg, spec.hi.d); cmp > 0 || cmp == 0 && (spec.lo.excl || spec.hi.excl) {
			return c.none(), nil
		}
	}
	var cuts []valueBound
	for _, v := range excluded(set) {
		if v.kind != jNumber {
			continue
		}
		neg, d, err := parseDecimal(v.text)
		if err != nil {
			return 0, &SchemaError{Keyword: "not", Msg: err.Error()}
		}
		cuts = append(cuts, valueBound{bound{set: true, d: d}, neg})
	}
	if len(cuts) == 0 {
		return c.number(spec), nil
	}
	// The values excluded cut the range: a number node per piece.
	slices.SortFunc(cuts, func(a, b valueBound) int { return cmpSigned(a.neg, a.d, b.neg, b.d) })
	var alts []int32
	lo := spec.lo
	for _, cut := range cuts {
		at := valueBound{bound{set: true, d: cut.d, excl: true}, cut.neg}
		piece := spec
		piece.lo, piece.hi = lo, tighterHigh(spec.hi, at)
		alts = append(alts, c.number(piece))
		lo = tighterLow(lo, at)
	}
	last := spec
	last.lo = lo
	alts = append(alts, c.number(last))
	return c.add(node{kind: kAnyOf, alts: alts}), nil
}

// numberKeywords narrows spec by the numeric keywords of s.
func (c *compiler) numberKeywords(s *jv, spec *numSpec) error {
	read := func(kw string, excl bool) (valueBound, bool, error) {
		v := s.get(kw)
		if v == nil || v.kind == jBool {
			return valueBound{}, false, nil
		}
		if v.kind != jNumber {
			return valueBound{}, false, kwErr(s, kw, "must be a number")
		}
		neg, d, err := parseDecimal(v.text)
		if err != nil {
			return valueBound{}, false, kwErr(s, kw, "%v", err)
		}
		return valueBound{bound{set: true, d: d, excl: excl}, neg}, true, nil
	}
	// Draft 4 writes exclusiveMinimum: true beside minimum.
	draft4 := func(kw string) bool { v := s.get(kw); return v != nil && v.kind == jBool && v.b }
	for _, b := range []struct {
		kw   string
		excl bool
		low  bool
	}{{"minimum", draft4("exclusiveMinimum"), true}, {"exclusiveMinimum", true, true},
		{"maximum", draft4("exclusiveMaximum"), false}, {"exclusiveMaximum", true, false}} {
		vb, ok, err := read(b.kw, b.excl)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if b.low {
			spec.lo = tighterLow(spec.lo, vb)
		} else {
			spec.hi = tighterHigh(spec.hi, vb)
		}
	}
	if f := s.get("format"); f != nil && f.kind == jString {
		if lo, hi, integer, ok := numberFormat(f.text); ok {
			nl, dl, _ := parseDecimal(lo)
			nh, dh, _ := parseDecimal(hi)
			spec.lo = tighterLow(spec.lo, valueBound{bound{set: true, d: dl}, nl})
			spec.hi = tighterHigh(spec.hi, valueBound{bound{set: true, d: dh}, nh})
			spec.integer = spec.integer || integer
		}
	}
	if m := s.get("multipleOf"); m != nil {
		neg, d, err := parseDecimal(m.text)
		if m.kind != jNumber || err != nil || neg || d.zero() {
			return kwErr(s, "multipleOf", "must be a number above 0")
		}
		p, scale, ok := lcmDecimal(spec.p, spec.scale, d)
		if !ok {
			return kwErr(s, "multipleOf", "is served up to %d significant units (its digits, with the others' multiples)", maxMultiple)
		}
		spec.p, spec.scale = p, scale
	}
	return nil
}

// lcmDecimal is the least common multiple of p/10^scale (p 0: none) and
// d, as a numerator and scale; false past maxMultiple.
func lcmDecimal(p int64, scale int, d decimal) (int64, int, bool) {
	num, ok := new(big.Int).SetString(d.i+d.f, 10)
	if !ok {
		return 0, 0, false
	}
	s := len(d.f)
	if p == 0 {
		if !num.IsInt64() || num.Int64() > maxMultiple {
			return 0, 0, false
		}
		return num.Int64(), s, true
	}
	a := new(big.Int).SetInt64(p)
	common := max(scale, s)
	ten := big.NewInt(10)
	a.Mul(a, new(big.Int).Exp(ten, big.NewInt(int64(common-scale)), nil))
	num.Mul(num, new(big.Int).Exp(ten, big.NewInt(int64(common-s)), nil))
	g := new(big.Int).GCD(nil, nil, a, num)
	l := new(big.Int).Div(new(big.Int).Mul(a, num), g)
	if !l.IsInt64() || l.Int64() > maxMultiple {
		return 0, 0, false
	}
	return l.Int64(), common, true
}

// tighterLow is the higher of two lower bounds.
func tighterLow(a, b valueBound) valueBound { return tighter(a, b, 1) }

// tighterHigh is the lower of two upper bounds.
func tighterHigh(a, b valueBound) valueBound { return tighter(a, b, -1) }

// tighter is the tighter of two bounds: b when it lies further in the
// direction dir (1: up, a lower bound's) or is as far and exclusive.
func tighter(a, b valueBound, dir int) valueBound {
	switch {
	case !a.set:
		return b
	case !b.set:
		return a
	}
	c := cmpSigned(b.neg, b.d, a.neg, a.d) * dir
	if c > 0 || c == 0 && b.excl {
		return b
	}
	return a
}
