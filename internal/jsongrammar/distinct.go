package jsongrammar

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Distinct keeps a generated text's array items (under uniqueItems) and
// object keys distinct: what an automaton cannot, as it would have to
// remember every item. It follows the text's containers byte by byte
// beside the automaton's state, and refuses a text that ends an item
// equal (as JSON Schema compares values) to an earlier item of its
// array, or a key equal to an earlier key of its object. The engine asks
// it of the tokens the mask admits (Refuses) and feeds it the token
// sampled (Feed). The arrays whose items are one set of literals the
// automaton tracks itself (arrNode.lit); Distinct follows the others.
type Distinct struct {
	text  []byte
	stack []*dcont
	inStr bool
	esc   bool
	// In a string: its characters so far, and the hex digits of a \u
	// escape still to come.
	chars, hexLeft int
}

// dcont is a container of the text.
type dcont struct {
	array  bool
	unique bool            // an array under uniqueItems
	seen   map[string]bool // its items (canonical) or keys so far
	lens   map[int]bool    // the lengths of their texts as written
	runes  map[int]bool    // the characters of those that are strings
	start  int             // where its current item or key began, -1: none
	key    bool            // an object: reading a key (else a value)
	open   int             // where it began
}

// NeedsDistinct reports whether texts of g need a Distinct: g has an
// array under uniqueItems it does not track itself, or an object with
// undeclared keys (which could repeat).
func (g *Grammar) NeedsDistinct() bool {
	for i := range g.nodes {
		nd := &g.nodes[i]
		if nd.kind == kArray && nd.arr.unique && nd.arr.lit == nil || nd.kind == kObject && len(nd.obj.extras) > 0 {
			return true
		}
	}
	return false
}

// uniqueOpen reports whether s, just after a '[', is in an array under
// uniqueItems the automaton does not track itself.
func (a *Automaton) uniqueOpen(s *State) bool {
	for _, t := range s.tops {
		nd := &a.g.nodes[t.f.n]
		if nd.kind == kArray && t.f.st == arrOpen && nd.arr.unique && nd.arr.lit == nil {
			return true
		}
	}
	return false
}

// Feed moves d and state s past text, byte by byte; it returns the
// state after it and false if text ends an item or key that repeats
// one (then d and the state are where the repeat ends).
func (d *Distinct) Feed(a *Automaton, s *State, text string) (*State, bool) {
	for i := 0; i < len(text); i++ {
		s = a.Feed(s, text[i:i+1])
		if !d.step(text[i], a.uniqueOpen(s), nil) {
			return s, false
		}
	}
	return s, true
}

// Refuses reports whether text, fed from here (state s), would end an
// item or key that repeats one. d is left as it was.
func (d *Distinct) Refuses(a *Automaton, s *State, text string) bool {
	if len(d.stack) == 0 || !d.mayEnd(text) && !d.mayCorner(text) && (d.inStr || !d.inUnique()) {
		return false
	}
	saved := d.save()
	var added []addedKey
	defer func() {
		for _, x := range added {
			delete(x.c.seen, x.k)
		}
		d.restore(saved)
	}()
	for i := 0; i < len(text); i++ {
		s = a.Feed(s, text[i:i+1])
		if !d.step(text[i], a.uniqueOpen(s), &added) {
			return true
		}
	}
	return d.cornered(a, s) || d.corneredLiteral(a, s) || d.corneredNext(a, s)
}

// corneredNext reports whether, just after the ',' of an array under
// uniqueItems, every item that may begin is cornered (corneredLiteral):
// the comma would commit to a repeat.
func (d *Distinct) corneredNext(a *Automaton, s *State) bool {
	top := d.topOf()
	if top == nil || !top.array || !top.unique || top.start >= 0 || len(d.text) == 0 || d.text[len(d.text)-1] != ',' {
		return false
	}
	for b := 0; b < 256; b++ {
		next := a.Feed(s, string([]byte{byte(b)}))
		if next.Dead() {
			continue
		}
		saved := d.save()
		var added []addedKey
		d.step(byte(b), a.uniqueOpen(next), &added)
		cornered := d.corneredLiteral(a, next)
		for _, x := range added {
			delete(x.c.seen, x.k)
		}
		d.restore(saved)
		if !cornered {
			return false
		}
	}
	return true
}

// inUnique reports whether the text is in an array under uniqueItems
// (outside a string, where few tokens may come: each is read whole).
func (d *Distinct) inUnique() bool {
	for _, c := range d.stack {
		if c.array && c.unique {
			return true
		}
	}
	return false
}

// mayEnd reports whether text may end a key or an item: a string at its
// closing quote, a number at ',', ']' or '}', a literal at its last
// letter (the container's end at ']' or '}' too).
func (d *Distinct) mayEnd(text string) bool {
	if d.inStr {
		return strings.IndexByte(text, '"') >= 0
	}
	return strings.ContainsAny(text, `",]}el`)
}

// mayCorner reports whether text, after the key or item being read,
// could make it as long as one seen (ended), as written, or begin a
// true, false or null: the only repeats cornered looks for without a
// byte that ends something.
func (d *Distinct) mayCorner(text string) bool {
	top := d.topOf()
	if top == nil {
		return false
	}
	if d.inStr {
		// As long, in characters, as a string seen: escapes and UTF-8
		// make the bytes no measure.
		for n := d.chars + 1; n <= d.chars+len(text); n++ {
			if top.runes[n] {
				return true
			}
		}
		return false
	}
	l := len(text) // the token begins the item
	if top.start >= 0 {
		l += len(d.text) - top.start
	}
	if top.lens[l] || top.lens[l+1] {
		return true
	}
	if l > len("false") {
		return false
	}
	partial := text
	if top.start >= 0 {
		partial = string(d.text[top.start:]) + text
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(lit, partial) {
			return true
		}
	}
	return false
}

// cornered reports whether the key or item being read, at state s, can
// only end as a repeat: its text so far, ended now, repeats one, and no
// byte but its end continues it (a string at its most characters, a
// number at its most digits).
func (d *Distinct) cornered(a *Automaton, s *State) bool {
	top := d.topOf()
	if top == nil || top.start < 0 || !(top.array && top.unique || !top.array && top.key) {
		return false
	}
	partial := d.text[top.start:]
	ends := ",]}"
	whole := partial
	if d.inStr {
		if d.esc {
			return false
		}
		ends, whole = `"`, append(slices.Clone(partial), '"')
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(lit, string(partial)) {
			// A literal begun ends one way only.
			return top.seen[lit]
		}
	}
	doc, err := parseDoc(whole)
	if err != nil || !top.seen[canonicalValue(doc.root)] {
		return false
	}
	for b := 0; b < 256; b++ {
		if strings.IndexByte(ends, byte(b)) < 0 && !a.Feed(s, string([]byte{byte(b)})).Dead() {
			return false
		}
	}
	return true
}

// addedKey is a key put in a container's seen during a dry run.
type addedKey struct {
	c *dcont
	k string
}

// distinctState is what a dry run may change of d.
type distinctState struct {
	n              int
	stack          []*dcont
	tops           []dcont
	inStr          bool
	esc            bool
	chars, hexLeft int
}

func (d *Distinct) save() distinctState {
	st := distinctState{n: len(d.text), stack: slices.Clone(d.stack), inStr: d.inStr, esc: d.esc, chars: d.chars, hexLeft: d.hexLeft}
	for _, c := range d.stack {
		st.tops = append(st.tops, *c)
	}
	return st
}

func (d *Distinct) restore(st distinctState) {
	d.text = d.text[:st.n]
	d.stack = st.stack
	for i, c := range d.stack {
		seen := c.seen
		*c = st.tops[i]
		c.seen = seen
	}
	d.inStr, d.esc, d.chars, d.hexLeft = st.inStr, st.esc, st.chars, st.hexLeft
}

// step reads byte b; unique: after it, the automaton is in an array
// under uniqueItems it does not track. added, on a dry run, records the
// keys put in containers' seen (and takes them out at the end).
func (d *Distinct) step(b byte, unique bool, added *[]addedKey) bool {
	pos := len(d.text)
	d.text = append(d.text, b)
	if d.inStr {
		switch {
		case d.hexLeft > 0:
			d.hexLeft--
		case d.esc:
			d.esc = false
			if b == 'u' {
				d.hexLeft = 4
			}
		case b == '\\':
			d.esc = true
			d.chars++
		case b == '"':
			d.inStr = false
			// A key, or a string item, is whole at its closing quote.
			if top := d.topOf(); top != nil && top.start >= 0 && d.text[top.start] == '"' && (top.key || top.array) {
				return d.end(top, pos+1, added)
			}
		case b < 0x80 || b >= 0xc0:
			d.chars++ // a character begins (UTF-8 continuations do not)
		}
		return true
	}
	top := d.topOf()
	if top != nil && top.start < 0 && b != ',' && b != ':' && b != ']' && b != '}' {
		top.start = pos // an item, key or value begins
	}
	switch b {
	case '"':
		d.inStr, d.chars = true, 0
	case '[', '{':
		d.stack = append(d.stack, &dcont{array: b == '[', unique: b == '[' && unique, seen: map[string]bool{}, lens: map[int]bool{}, runes: map[int]bool{}, start: -1, key: b == '{', open: pos})
	case ']', '}':
		if top != nil {
			if !d.end(top, pos, added) {
				return false
			}
			d.stack = d.stack[:len(d.stack)-1]
			// A container item is whole at its closing bracket.
			if up := d.topOf(); up != nil && up.array && up.start == top.open {
				return d.end(up, pos+1, added)
			}
		}
	case ',':
		if top != nil {
			if !d.end(top, pos, added) {
				return false
			}
			top.key = !top.array
		}
	case ':':
		if top != nil {
			top.key, top.start = false, -1
		}
	case 'e', 'l':
		// true, false and null are whole at their last letter.
		if top != nil && top.array && top.start >= 0 {
			switch string(d.text[top.start:]) {
			case "true", "false", "null":
				return d.end(top, pos+1, added)
			}
		}
	}
	return true
}

func (d *Distinct) topOf() *dcont {
	if len(d.stack) == 0 {
		return nil
	}
	return d.stack[len(d.stack)-1]
}

// end ends the current item or key of c at end: false if it repeats.
func (d *Distinct) end(c *dcont, end int, added *[]addedKey) bool {
	start := c.start
	c.start = -1
	if start < 0 || !(c.array && c.unique) && !(!c.array && c.key) {
		return true
	}
	doc, err := parseDoc(d.text[start:end])
	if err != nil {
		return true
	}
	k := canonicalValue(doc.root)
	if c.seen[k] {
		return false
	}
	c.seen[k] = true
	if added != nil {
		*added = append(*added, addedKey{c, k})
	} else {
		c.lens[end-start] = true
		if doc.root.kind == jString {
			c.runes[utf8.RuneCountInString(doc.root.text)] = true
		}
	}
	return true
}

// corneredLiteral reports whether the item being read of an array under
// uniqueItems can only end as a repeat because the automaton reads a
// literal (an enum or const value, an object as one) whose every
// completion ends the item as one seen.
func (d *Distinct) corneredLiteral(a *Automaton, s *State) bool {
	var arr *dcont
	for i := len(d.stack) - 1; i >= 0 && arr == nil; i-- {
		if c := d.stack[i]; c.array && c.unique {
			arr = c
		}
	}
	if arr == nil || arr.start < 0 || len(s.tops) == 0 {
		return false
	}
	partial := string(d.text[arr.start:])
	for _, t := range s.tops {
		nd := &a.g.nodes[t.f.n]
		if nd.kind != kLiteral || t.f.st != litIn {
			return false
		}
		for _, suffix := range suffixes(nd.lit, t.f.a, maxUniqueLiterals) {
			doc, err := parseDoc([]byte(partial + suffix))
			if err != nil || !arr.seen[canonicalValue(doc.root)] {
				return false
			}
		}
	}
	return true
}

// suffixes are the endings of the texts below trie node n (nil past most).
func suffixes(t *litTrie, n int32, most int) []string {
	var out []string
	var walk func(n int32, prefix []byte) bool
	walk = func(n int32, prefix []byte) bool {
		if t.nodes[n].term {
			out = append(out, string(prefix))
		}
		for _, e := range t.nodes[n].edges {
			if len(out) > most || !walk(e.to, append(prefix, e.b)) {
				return false
			}
		}
		return len(out) <= most
	}
	if !walk(n, nil) {
		return nil
	}
	return out
}

// canonicalValue is a JSON value's text up to what JSON Schema's
// equality ignores: members sorted, numbers by value.
func canonicalValue(v *jv) string {
	var b strings.Builder
	var write func(v *jv)
	write = func(v *jv) {
		switch v.kind {
		case jNumber:
			neg, d, err := parseDecimal(v.text)
			if err != nil {
				b.WriteString(v.text)
				return
			}
			if neg {
				b.WriteByte('-')
			}
			b.WriteString(d.i)
			if d.f != "" {
				b.WriteString("." + d.f)
			}
		case jArray:
			b.WriteByte('[')
			for i, x := range v.arr {
				if i > 0 {
					b.WriteByte(',')
				}
				write(x)
			}
			b.WriteByte(']')
		case jObject:
			ms := slices.Clone(v.obj)
			slices.SortFunc(ms, func(x, y jmember) int { return strings.Compare(x.k, y.k) })
			b.WriteByte('{')
			for i, m := range ms {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(jsonString(m.k) + ":")
				write(m.v)
			}
			b.WriteByte('}')
		default:
			v.write(&b)
		}
	}
	write(v)
	return b.String()
}
