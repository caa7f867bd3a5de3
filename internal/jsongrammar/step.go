package jsongrammar

// Frame states, per node kind; 0 is a value not begun (it begins with
// the next byte).
const (
	objOpen  = iota + 1 // after '{': a key or '}'
	objKey              // in a declared key, at trie node d
	objColon            // after the key of props[a] (a < 0: extras[-a-1]): ':'
	objValue            // after ':': its value
	objAfter            // after a value: ',' or '}'
	objComma            // after ',': a key
)

// In every object state, a is the position (the next property that may
// come), b the members so far, c the properties chosen (their bits).

const (
	arrOpen  = iota + 1 // after '[': an item or ']'
	arrAfter            // after a items: ',' or ']'
	arrComma            // after ',', a items: an item
	arrLit              // in an item of an array's own literals, at trie node c
)

// In an array of its own literals (arrNode.lit), b is the literals used.

const (
	strIn   = iota + 1 // in the string, at state a after b characters
	strEsc             // after '\'
	strHex             // in \u: the code point so far c, d digits to go
	strUTF2            // in a UTF-8 sequence of 2, 3 or 4 bytes: c so far, d to go
	strUTF3
	strUTF4
	numIn // in a number, at state a
	litIn // in a literal, at trie node a
)

// walker computes a transition: the parses of a state after one byte.
type walker struct {
	g     *Grammar
	s     *gss
	out   topSet
	steps int
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// re makes t's frame f' a top over t's parents.
func (w *walker) re(t *gnode, f frame) { w.out.add(f, t.depth, t.up) }

// push is t's frame f' as a parent of a value to begin.
func (w *walker) push(t *gnode, f frame) []*gnode {
	return []*gnode{w.s.intern(f, t.depth, t.up)}
}

// pop ends t's value: its parents are tops again.
func (w *walker) pop(t *gnode) {
	for _, p := range t.up {
		w.out.add(p.f, p.depth, p.up)
	}
}

// popStep ends t's value before byte c, which its parents read.
func (w *walker) popStep(t *gnode, c byte) {
	for _, p := range t.up {
		w.step(p, c)
	}
}

// begin starts a value of node n over ups, at frame depth d, with its
// first byte c.
func (w *walker) begin(n int32, c byte, ups []*gnode, d int32) {
	g := w.g
	for _, leaf := range g.leaves[n] {
		if !g.fits(leaf, d) {
			continue
		}
		w.steps++
		nd := &g.nodes[leaf]
		switch nd.kind {
		case kObject:
			if c == '{' {
				w.out.add(frame{n: leaf, st: objOpen}, d, ups)
			}
		case kArray:
			if c == '[' {
				w.out.add(frame{n: leaf, st: arrOpen}, d, ups)
			}
		case kString:
			if c == '"' {
				w.out.add(frame{n: leaf, st: strIn}, d, ups)
			}
		case kNumber:
			if cl := numClass(c); cl >= 0 {
				if q := nd.num.next[0][cl]; q >= 0 {
					w.out.add(frame{n: leaf, st: numIn, a: q}, d, ups)
				}
			}
		case kLiteral:
			if t := nd.lit.child(0, c); t >= 0 {
				if ln := &nd.lit.nodes[t]; ln.term && len(ln.edges) == 0 {
					for _, p := range ups {
						w.out.add(p.f, p.depth, p.up)
					}
				} else {
					w.out.add(frame{n: leaf, st: litIn, a: t}, d, ups)
				}
			}
		}
	}
}

// step feeds byte c to the parse t.
func (w *walker) step(t *gnode, c byte) {
	w.steps++
	f := t.f
	if f.st == 0 {
		w.begin(f.n, c, t.up, t.depth)
		return
	}
	nd := &w.g.nodes[f.n]
	switch nd.kind {
	case kLiteral:
		if n := nd.lit.child(f.a, c); n >= 0 {
			if ln := &nd.lit.nodes[n]; ln.term && len(ln.edges) == 0 {
				w.pop(t)
			} else {
				w.re(t, frame{n: f.n, st: litIn, a: n})
			}
		} else if nd.lit.nodes[f.a].term {
			w.popStep(t, c)
		}
	case kNumber:
		if cl := numClass(c); cl >= 0 && nd.num.next[f.a][cl] >= 0 {
			w.re(t, frame{n: f.n, st: numIn, a: nd.num.next[f.a][cl]})
		} else if nd.num.accept[f.a] {
			w.popStep(t, c)
		}
	case kString:
		w.stringStep(t, nd.str, c)
	case kObject:
		w.objectStep(t, nd.obj, c)
	case kArray:
		w.arrayStep(t, nd.arr, c)
	}
}

func (w *walker) arrayStep(t *gnode, a *arrNode, c byte) {
	if a.lit != nil {
		w.uniqueStep(t, a, t.f, c)
		return
	}
	f, d := t.f, t.depth+1
	clip := func(k int32) int32 {
		if a.maxItems >= 0 {
			return k
		}
		return min(k, int32(max(a.minItems, len(a.prefix))))
	}
	itemOK := func(k int32) bool {
		it := a.item(int(k))
		return (a.maxItems < 0 || int(k) < a.maxItems) && it >= 0 && w.g.fits(it, d)
	}
	switch f.st {
	case arrOpen:
		if c == ']' && a.minItems == 0 {
			w.pop(t)
		} else if itemOK(0) {
			w.begin(a.item(0), c, w.push(t, frame{n: f.n, st: arrAfter, a: clip(1)}), d)
		}
	case arrAfter:
		switch {
		case c == ',' && itemOK(f.a):
			w.re(t, frame{n: f.n, st: arrComma, a: f.a})
		case c == ']' && int(f.a) >= a.minItems:
			w.pop(t)
		}
	case arrComma:
		w.begin(a.item(int(f.a)), c, w.push(t, frame{n: f.n, st: arrAfter, a: clip(f.a + 1)}), d)
	}
}

// uniqueStep reads byte c of an array of its own literals at frame f:
// an item begins only with a literal not yet used, and ends as one.
func (w *walker) uniqueStep(t *gnode, a *arrNode, f frame, c byte) {
	lit, used := a.lit, uint32(f.b)
	free := func(n int32) bool { return lit.nodes[n].below&^used != 0 }
	// into moves to trie node n of an item.
	into := func(n int32) {
		ln := &lit.nodes[n]
		if ln.term && len(ln.edges) == 0 {
			w.re(t, frame{n: f.n, st: arrAfter, a: f.a + 1, b: int32(used | 1<<ln.index)})
		} else {
			w.re(t, frame{n: f.n, st: arrLit, a: f.a, b: f.b, c: n})
		}
	}
	switch f.st {
	case arrOpen, arrComma:
		if f.st == arrOpen && c == ']' && a.minItems == 0 {
			w.pop(t)
		} else if n := lit.child(0, c); n >= 0 && free(n) && (a.maxItems < 0 || int(f.a) < a.maxItems) {
			into(n)
		}
	case arrLit:
		if n := lit.child(f.c, c); n >= 0 && free(n) {
			into(n)
		} else if ln := &lit.nodes[f.c]; ln.term && used&(1<<ln.index) == 0 {
			// The item ended before c: c is the array's.
			w.uniqueStep(t, a, frame{n: f.n, st: arrAfter, a: f.a + 1, b: int32(used | 1<<ln.index)}, c)
		}
	case arrAfter:
		switch {
		case c == ',' && (a.maxItems < 0 || int(f.a) < a.maxItems) && lit.nodes[0].below&^used != 0:
			w.re(t, frame{n: f.n, st: arrComma, a: f.a, b: f.b})
		case c == ']' && int(f.a) >= a.minItems:
			w.pop(t)
		}
	}
}

func (w *walker) objectStep(t *gnode, o *objNode, c byte) {
	f, d := t.f, t.depth+1
	g := w.g
	switch f.st {
	case objOpen, objComma:
		if c == '}' && f.st == objOpen && o.closeOK(f.a, f.b, f.c) {
			w.pop(t)
			return
		}
		if c != '"' {
			return
		}
		if g.keyOK(o, 0, f.a, f.b, f.c, d) {
			w.re(t, frame{n: f.n, st: objKey, a: f.a, b: f.b, c: f.c})
		}
		for x := range o.extras {
			if g.extraOK(o, int32(x), f.a, f.b, f.c, d) {
				w.begin(o.extras[x].key, c, w.push(t, frame{n: f.n, st: objColon, a: -int32(x) - 1, b: f.b, c: f.c}), d)
			}
		}
	case objKey:
		n := o.trie.child(f.d, c)
		if n < 0 || !g.keyOK(o, n, f.a, f.b, f.c, d) {
			return
		}
		if j := o.trie.nodes[n].term; j >= 0 {
			w.re(t, frame{n: f.n, st: objColon, a: j, b: f.b, c: f.c})
		} else {
			w.re(t, frame{n: f.n, st: objKey, a: f.a, b: f.b, c: f.c, d: n})
		}
	case objColon:
		if c == ':' {
			w.re(t, frame{n: f.n, st: objValue, a: f.a, b: f.b, c: f.c})
		}
	case objValue:
		count := min(f.b+1, int32(max(o.minProps, o.maxProps)))
		var val, pos, chosen int32
		if f.a >= 0 {
			val, pos, chosen = o.props[f.a].val, f.a+1, o.choose(f.a, f.c)
		} else {
			val, pos, chosen = o.extras[-f.a-1].val, int32(len(o.props)), f.c
		}
		w.begin(val, c, w.push(t, frame{n: f.n, st: objAfter, a: pos, b: count, c: chosen}), d)
	case objAfter:
		switch {
		case c == ',' && g.moreOK(o, f.a, f.b, f.c, d):
			w.re(t, frame{n: f.n, st: objComma, a: f.a, b: f.b, c: f.c})
		case c == '}' && o.closeOK(f.a, f.b, f.c):
			w.pop(t)
		}
	}
}

// stringStep reads byte c of a string: the JSON text of its characters,
// each raw (UTF-8) or escaped.
func (w *walker) stringStep(t *gnode, s *strNode, c byte) {
	f := t.f
	q, n := f.a, int(f.b)
	// char moves past character r.
	char := func(r rune) {
		if to := s.d.next(q, r); to >= 0 && s.lenOK(to, n+1) {
			w.re(t, frame{n: f.n, st: strIn, a: to, b: int32(s.clip(n + 1))})
		}
	}
	// partial continues a character whose code point is in lo..hi;
	// exact: any bytes left make a valid one. When one transition
	// covers lo..hi, the character's value no longer matters: the frame
	// keeps its target instead (c < 0), so that the characters of a
	// string differ in no state they need not (a vocabulary's thousands
	// of UTF-8 prefixes would each make one).
	partial := func(st uint8, v, left int32, lo, hi rune, exact bool) {
		if lo > hi {
			return
		}
		if to, ok := s.settles(q, lo, hi); ok && exact && left > 0 {
			if s.lenOK(to, n+1) {
				w.re(t, frame{n: f.n, st: st, a: q, b: f.b, c: -to - 1, d: left})
			}
			return
		}
		if s.charOK(q, n, lo, hi) {
			w.re(t, frame{n: f.n, st: st, a: q, b: f.b, c: v, d: left})
		}
	}
	// settled moves on in a character whose target is known.
	settled := func() {
		if f.d > 1 {
			w.re(t, frame{n: f.n, st: f.st, a: q, b: f.b, c: f.c, d: f.d - 1})
		} else {
			w.re(t, frame{n: f.n, st: strIn, a: -f.c - 1, b: int32(s.clip(n + 1))})
		}
	}
	switch f.st {
	case strIn:
		switch {
		case c == '"':
			if s.closeOK(q, n) {
				w.pop(t)
			}
		case c == '\\':
			partial(strEsc, 0, 0, 0, 0xffff, false)
		case c < 0x20:
		case c < 0x80:
			char(rune(c))
		case c >= 0xc2 && c <= 0xdf:
			lo, hi, exact := utf8Span(int32(c&0x1f), 1, 0x80, 0x7ff)
			partial(strUTF2, int32(c&0x1f), 1, lo, hi, exact)
		case c >= 0xe0 && c <= 0xef:
			lo, hi, exact := utf8Span(int32(c&0x0f), 2, 0x800, 0xffff)
			partial(strUTF3, int32(c&0x0f), 2, lo, hi, exact)
		case c >= 0xf0 && c <= 0xf4:
			lo, hi, exact := utf8Span(int32(c&0x07), 3, 0x10000, 0x10ffff)
			partial(strUTF4, int32(c&0x07), 3, lo, hi, exact)
		}
	case strEsc:
		switch c {
		case '"', '\\', '/':
			char(rune(c))
		case 'b':
			char('\b')
		case 'f':
			char('\f')
		case 'n':
			char('\n')
		case 'r':
			char('\r')
		case 't':
			char('\t')
		case 'u':
			partial(strHex, 0, 4, 0, 0xffff, false)
		}
	case strHex:
		switch {
		case !isHex(c):
		case f.c < 0:
			settled()
		case f.d == 1:
			char(rune(f.c<<4 | int32(hexVal(c))))
		default:
			v, shift := f.c<<4|int32(hexVal(c)), 4*(f.d-1)
			partial(strHex, v, f.d-1, rune(v<<shift), rune(v<<shift|(1<<shift-1)), true)
		}
	case strUTF2, strUTF3, strUTF4:
		switch {
		case c < 0x80 || c > 0xbf:
		case f.c < 0:
			settled()
		case f.d == 1:
			char(rune(f.c<<6 | int32(c&0x3f)))
		default:
			v := f.c<<6 | int32(c&0x3f)
			lo, hi, exact := utf8Span(v, f.d-1, 0x800, 0xffff)
			if f.st == strUTF4 {
				lo, hi, exact = utf8Span(v, f.d-1, 0x10000, 0x10ffff)
			}
			partial(f.st, v, f.d-1, lo, hi, exact)
		}
	}
}

// utf8Span is the code points a UTF-8 sequence may end as with value v
// so far and left continuation bytes to come, within lo..hi; exact when
// the bounds cut nothing (any continuation bytes make a valid one).
func utf8Span(v, left int32, lo, hi rune) (rune, rune, bool) {
	shift := 6 * left
	a, b := rune(v<<shift), rune(v<<shift|(1<<shift-1))
	return max(lo, a), min(hi, b), a >= lo && b <= hi
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// mayEnd reports whether the value of frame f may end where it is, with
// no byte more.
func (g *Grammar) mayEnd(f frame) bool {
	switch nd := &g.nodes[f.n]; {
	case nd.kind == kNumber && f.st == numIn:
		return nd.num.accept[f.a]
	case nd.kind == kLiteral && f.st == litIn:
		return nd.lit.nodes[f.a].term
	}
	return false
}
