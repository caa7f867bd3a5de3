package jsongrammar

import (
	"encoding/binary"
)

// Frame states, per node kind.
const (
	objOpen  = iota + 1 // after '{': a key or '}'
	objKey              // in the key literal of props[a], at byte b
	objColon            // after the key of props[a] (a -1: a free key): ':'
	objValue            // after ':': the value of props[a] (a -1: addl)
	objAfter            // after a value, a the next property index: ',' or '}'
	objComma            // after ',', a the next property index: a key
)

const (
	arrOpen  = iota + 1 // after '[': an item or ']'
	arrAfter            // after a items (clipped): ',' or ']'
	arrComma            // after ',', a items: an item
)

const (
	strIn    = iota + 1 // in the string; with a pattern, at atom a, its count b
	strEsc              // after '\'
	strHex              // in \u, a hex digits to go
	strCont             // in a UTF-8 sequence, a continuation bytes to go
	litIn               // in lits[a], at byte b
	numSign             // after '-'
	numZero             // after the leading 0
	numInt              // in the integer part, a digits
	numDot              // after '.'
	numFrac             // in the fraction, a digits
	numE                // after 'e'
	numESign            // after the exponent's sign
	numExp              // in the exponent, a digits
)

// maxExpDigits bounds an exponent.
const maxExpDigits = 3

// frame is one level of a parse: a node and where in it.
type frame struct {
	n    int32
	st   uint8
	a, b int32
}

// stack is an immutable parse stack; up is the frame below.
type stack struct {
	f     frame
	up    *stack
	depth int
	key   string // identifies the stack: equal keys, equal futures
}

func (g *Grammar) push(up *stack, f frame) *stack {
	var buf [1 + 3*binary.MaxVarintLen32]byte
	b := binary.AppendUvarint(buf[:0], uint64(f.n))
	b = append(b, f.st)
	b = binary.AppendVarint(b, int64(f.a))
	b = binary.AppendVarint(b, int64(f.b))
	s := &stack{f: f, up: up}
	if up != nil {
		s.depth = up.depth + 1
		s.key = string(b) + up.key
	} else {
		s.key = string(b)
	}
	return s
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// begin starts a value of node n under up with its first byte c.
func (g *Grammar) begin(up *stack, n int, c byte, out *[]*stack) {
	nd := &g.nodes[n]
	switch nd.kind {
	case kAnyOf:
		for _, alt := range nd.alts {
			g.begin(up, alt, c, out)
		}
	case kObject:
		if c == '{' && g.depthOK(up) {
			*out = append(*out, g.push(up, frame{n: int32(n), st: objOpen}))
		}
	case kArray:
		if c == '[' && g.depthOK(up) {
			*out = append(*out, g.push(up, frame{n: int32(n), st: arrOpen}))
		}
	case kString:
		if c == '"' {
			*out = append(*out, g.push(up, frame{n: int32(n), st: strIn}))
		}
	case kNumber, kInteger:
		switch {
		case c == '-':
			*out = append(*out, g.push(up, frame{n: int32(n), st: numSign}))
		case c == '0':
			*out = append(*out, g.push(up, frame{n: int32(n), st: numZero}))
		case isDigit(c):
			*out = append(*out, g.push(up, frame{n: int32(n), st: numInt, a: 1}))
		}
	case kLiteral:
		for i, lit := range nd.lits {
			if lit[0] != c {
				continue
			}
			if len(lit) == 1 {
				*out = append(*out, up)
			} else {
				*out = append(*out, g.push(up, frame{n: int32(n), st: litIn, a: int32(i), b: 1}))
			}
		}
	}
}

// step feeds byte c to stack s, appending the stacks that may follow.
func (g *Grammar) step(s *stack, c byte, out *[]*stack) {
	f, up := s.f, s.up
	if f.st == 0 { // a value not begun
		g.begin(up, int(f.n), c, out)
		return
	}
	nd := &g.nodes[f.n]
	re := func(st uint8, a, b int32) { *out = append(*out, g.push(up, frame{n: f.n, st: st, a: a, b: b})) }
	switch nd.kind {
	case kEnd, kAnyOf:
	case kLiteral:
		lit := nd.lits[f.a]
		if lit[f.b] == c {
			if int(f.b)+1 == len(lit) {
				*out = append(*out, up)
			} else {
				re(litIn, f.a, f.b+1)
			}
		}
	case kString:
		g.stringStep(s, nd, c, out)
	case kNumber, kInteger:
		real := nd.kind == kNumber
		switch {
		case f.st == numSign && c == '0':
			re(numZero, 0, 0)
		case f.st == numSign && isDigit(c):
			re(numInt, 1, 0)
		case (f.st == numInt || f.st == numFrac) && isDigit(c) && f.a < MaxDigits:
			re(f.st, f.a+1, 0)
		case (f.st == numZero || f.st == numInt) && real && c == '.':
			re(numDot, 0, 0)
		case f.st == numDot && isDigit(c):
			re(numFrac, 1, 0)
		case (f.st == numZero || f.st == numInt || f.st == numFrac) && real && (c == 'e' || c == 'E'):
			re(numE, 0, 0)
		case f.st == numE && (c == '+' || c == '-'):
			re(numESign, 0, 0)
		case (f.st == numE || f.st == numESign) && isDigit(c):
			re(numExp, 1, 0)
		case f.st == numExp && isDigit(c) && f.a < maxExpDigits:
			re(numExp, f.a+1, 0)
		case numberDone(f.st):
			g.step(up, c, out) // the number ended before c
		}
	case kObject:
		g.objectStep(s, nd, c, out)
	case kArray:
		switch {
		case f.st == arrOpen && c == ']' && nd.minItems == 0:
			*out = append(*out, up)
		case f.st == arrComma || f.st == arrOpen && nd.maxItems != 0:
			g.begin(g.push(up, frame{n: f.n, st: arrAfter, a: g.clipItems(nd, f.a+1)}), nd.items, c, out)
		case f.st == arrAfter && c == ',' && (g.maxOf(nd) < 0 || int(f.a) < g.maxOf(nd)):
			re(arrComma, f.a, 0)
		case f.st == arrAfter && c == ']' && int(f.a) >= nd.minItems:
			*out = append(*out, up)
		}
	}
}

func numberDone(st uint8) bool {
	return st == numZero || st == numInt || st == numFrac || st == numExp
}

// maxOf is the most items of array nd, -1 for no bound.
func (g *Grammar) maxOf(nd *node) int {
	if nd.maxItems < 0 && g.maxItems > 0 {
		return max(g.maxItems, nd.minItems)
	}
	return nd.maxItems
}

// clipItems is n items, clipped where the count no longer matters.
func (g *Grammar) clipItems(nd *node, n int32) int32 {
	if g.maxOf(nd) >= 0 {
		return n
	}
	return min(n, int32(nd.minItems))
}

// depthOK reports whether a container may open above up.
func (g *Grammar) depthOK(up *stack) bool {
	return up.depth < MaxStackDepth && (g.maxDepth <= 0 || up.depth <= g.maxDepth)
}

func (g *Grammar) stringStep(s *stack, nd *node, c byte, out *[]*stack) {
	f, up := s.f, s.up
	re := func(st uint8, a, b int32) { *out = append(*out, g.push(up, frame{n: f.n, st: st, a: a, b: b})) }
	if nd.pat != nil {
		g.patternStep(s, nd.pat, c, out)
		return
	}
	n := f.b // bytes so far, when strings are bounded
	if g.maxString > 0 {
		n++
		re = func(st uint8, a, _ int32) { *out = append(*out, g.push(up, frame{n: f.n, st: st, a: a, b: n})) }
	}
	switch f.st {
	case strIn:
		switch {
		case c == '"':
			*out = append(*out, up)
		case g.maxString > 0 && int(n) > g.maxString:
		case c == '\\':
			re(strEsc, 0, 0)
		case c < 0x20:
		case c < 0x80 && g.maxString > 0:
			re(strIn, 0, 0)
		case c < 0x80:
			*out = append(*out, s)
		case c >= 0xC2 && c <= 0xDF:
			re(strCont, 1, 0)
		case c >= 0xE0 && c <= 0xEF:
			re(strCont, 2, 0)
		case c >= 0xF0 && c <= 0xF4:
			re(strCont, 3, 0)
		}
	case strEsc:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			re(strIn, 0, 0)
		case 'u':
			re(strHex, 4, 0)
		}
	case strHex:
		if isHex(c) {
			if f.a == 1 {
				re(strIn, 0, 0)
			} else {
				re(strHex, f.a-1, 0)
			}
		}
	case strCont:
		if c >= 0x80 && c <= 0xBF {
			if f.a == 1 {
				re(strIn, 0, 0)
			} else {
				re(strCont, f.a-1, 0)
			}
		}
	}
}

// patternStep feeds c to a string of pattern p at atom f.a, count f.b.
func (g *Grammar) patternStep(s *stack, p *pattern, c byte, out *[]*stack) {
	f, up := s.f, s.up
	i, n := int(f.a), int(f.b)
	if c == '"' {
		if p.canEnd(i, n) {
			*out = append(*out, up)
		}
		return
	}
	for i < len(p.atoms) {
		a := &p.atoms[i]
		am := a.max
		if am < 0 && g.maxString > 0 {
			am = g.maxString
		}
		if a.has(c) && (am < 0 || n < am) {
			next := n + 1
			if am < 0 {
				next = a.clip(next)
			}
			*out = append(*out, g.push(up, frame{n: f.n, st: strIn, a: int32(i), b: int32(next)}))
		}
		if n < a.min {
			return
		}
		i, n = i+1, 0
	}
}

func (p *pattern) canEnd(i, n int) bool {
	for ; i < len(p.atoms); i, n = i+1, 0 {
		if n < p.atoms[i].min {
			return false
		}
	}
	return true
}

// needs reports whether the object must still have a property from index pos.
func (nd *node) needs(pos int32) bool {
	for _, p := range nd.props[min(int(pos), len(nd.props)):] {
		if p.required {
			return true
		}
	}
	return false
}

func (g *Grammar) objectStep(s *stack, nd *node, c byte, out *[]*stack) {
	f, up := s.f, s.up
	re := func(st uint8, a, b int32) { *out = append(*out, g.push(up, frame{n: f.n, st: st, a: a, b: b})) }
	switch f.st {
	case objOpen, objComma:
		if c == '}' && f.st == objOpen && (nd.free || !nd.needs(0)) {
			*out = append(*out, up)
			return
		}
		if c != '"' {
			return
		}
		if nd.free {
			parent := g.push(up, frame{n: f.n, st: objColon, a: -1, b: f.a})
			*out = append(*out, g.push(parent, frame{n: int32(nd.keyStr), st: strIn}))
			return
		}
		for j := int(f.a); j < len(nd.props); j++ {
			re(objKey, int32(j), 1)
			if nd.props[j].required {
				break
			}
		}
	case objKey:
		lit := nd.props[f.a].lit
		if lit[f.b] == c {
			if int(f.b)+1 == len(lit) {
				re(objColon, f.a, 0)
			} else {
				re(objKey, f.a, f.b+1)
			}
		}
	case objColon:
		if c == ':' {
			re(objValue, f.a, f.b)
		}
	case objValue:
		val, next := nd.addl, int32(0)
		if g.maxItems > 0 {
			next = f.b + 1 // members of a free object
		}
		if f.a >= 0 {
			val, next = nd.props[f.a].val, f.a+1
		}
		g.begin(g.push(up, frame{n: f.n, st: objAfter, a: next}), val, c, out)
	case objAfter:
		switch {
		case c == ',' && nd.free && (g.maxItems <= 0 || int(f.a) < g.maxItems):
			re(objComma, f.a, 0)
		case c == ',' && !nd.free && int(f.a) < len(nd.props):
			re(objComma, f.a, 0)
		case c == '}' && (nd.free || !nd.needs(f.a)):
			*out = append(*out, up)
		}
	}
}

// canEnd reports whether the parse s may end here.
func (g *Grammar) canEnd(s *stack) bool {
	switch nd := &g.nodes[s.f.n]; {
	case s.f.st == 0:
		return false
	case nd.kind == kEnd:
		return true
	case (nd.kind == kNumber || nd.kind == kInteger) && numberDone(s.f.st):
		return g.canEnd(s.up)
	}
	return false
}
