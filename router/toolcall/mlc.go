package toolcall

// mlcStartLen is how much of an output's start mlcCouldStart reads: a
// function's name and the parenthesis after it.
const mlcStartLen = 64

// mlcCouldStart reports whether output (left-trimmed, non-empty, at most
// mlcStartLen bytes of its start) may hold a call as parseMLC reads one:
// a list (of call strings), a comment line before one, or a name followed
// by "(" once it is seen. Anything else (prose, a literal) is text from
// its first words, released at once rather than held to the end.
func mlcCouldStart(t string) bool {
	switch c := t[0]; {
	case c == '[' || c == '#':
		return true
	case !pyIdentByte(c) || c >= '0' && c <= '9':
		return false
	}
	i := 0
	for i < len(t) && pyIdentByte(t[i]) {
		i++
	}
	for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
		i++
	}
	return i == len(t) || t[i] == '('
}

// pyIdentByte reports whether b may be part of a Python name (a byte of a
// non-ASCII letter taken for one).
func pyIdentByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// parseMLC reads the whole output as MLC-LLM's convert_function_str_to_json
// does (python/mlc_llm/serve/engine_base.py). Output that starts with "["
// and ends with "]" is ast.literal_eval'd into a list whose elements must
// be strings, each then ast.parse'd; any other output is ast.parse'd
// itself. An element that parses as name(kw=literal, …) is a call (MLC
// drops positional arguments); one that parses as another expression is
// dropped; when none is a call, or one fails to parse, MLC answers "Got an
// invalid function call output from model", and we return the text.
//
// Where MLC differs: we recognise only literals and bare names as the
// expressions it drops (MLC drops any, such as a.b(x=1)); we take only
// literal positional arguments (MLC any expression); and where MLC would
// raise an uncaught TypeError (a list element that is not a string), or
// crash on empty output, we return the text.
func parseMLC(output string) ([]Call, bool) {
	if output == "" {
		return nil, false
	}
	if output[0] == '[' && output[len(output)-1] == ']' {
		return mlcList(output)
	}
	c, isCall, ok := mlcCall(output)
	if !ok || !isCall {
		return nil, false
	}
	return []Call{c}, true
}

// mlcList reads a Python list literal of strings, each a call or a
// droppable expression.
func mlcList(output string) ([]Call, bool) {
	r := &pyReader{src: output}
	r.open()
	var calls []Call
	ok := r.seq(']', func() bool {
		if !r.atString() {
			return false
		}
		s, ok := r.stringLit()
		if !ok {
			return false
		}
		c, isCall, ok := mlcCall(s)
		if isCall {
			calls = append(calls, c)
		}
		return ok
	})
	return calls, ok && r.atEnd() && len(calls) > 0
}

// mlcCall parses s as ast.parse(s, mode="eval") would, reporting whether it
// is a name(…) call and whether it parses at all.
func mlcCall(s string) (c Call, isCall, ok bool) {
	r := &pyReader{src: s}
	if !r.skipLeadingLines() {
		return Call{}, false, false
	}
	start := r.pos
	name := r.ident()
	r.skipSpace()
	if name != "" && !isPyKeyword(name) {
		if r.peek() == '(' {
			r.pos = start
			c, ok := r.call(true)
			return c, true, ok && r.atEnd()
		}
		return Call{}, false, r.atEnd() // a bare name: MLC drops it
	}
	r.pos = start
	_, ok = r.value(nil) // a literal: MLC drops it
	return Call{}, false, ok && r.atEnd()
}

// skipLeadingLines skips the blank and comment-only lines Python's
// tokenizer skips, and reports false where Python stops: no expression at
// all, or an indented first line ("unexpected indent").
func (r *pyReader) skipLeadingLines() bool {
	for {
		lineStart := r.pos
		r.skipSpace()
		switch r.peek() {
		case '\n', '\r':
			r.pos++
			continue
		case 0:
			if r.pos == len(r.src) {
				return false
			}
		}
		return r.pos == lineStart
	}
}

// atEnd skips what may follow an expression at the top level (blanks,
// comments, newlines) and reports whether nothing else is left.
func (r *pyReader) atEnd() bool {
	for {
		r.skipSpace()
		if c := r.peek(); c != '\n' && c != '\r' {
			return r.pos == len(r.src)
		}
		r.pos++
	}
}
