package toolcall

import "strings"

// call reads name(kw=literal, …) at pos as a Call. With positional,
// literal positional arguments may come before the keywords and are
// dropped, as MLC drops them; without, they make it no call.
func (r *pyReader) call(positional bool) (Call, bool) {
	name := r.ident()
	if name == "" || isPyKeyword(name) {
		return Call{}, false
	}
	r.skipSpace()
	if r.peek() != '(' || !r.open() {
		return Call{}, false
	}
	var args pyDict
	keywords := false
	ok := r.seq(')', func() bool {
		if kw, ok := r.keyword(); ok {
			keywords = true
			val, ok := r.value(nil)
			args.set(kw, val)
			return ok
		}
		if !positional || keywords {
			return false // Python: "positional argument follows keyword argument"
		}
		_, ok := r.value(nil)
		return ok
	})
	return Call{Name: name, Arguments: string(args.appendJSON(nil))}, ok
}

// keyword reads "name =" at pos, or reads nothing and reports false.
func (r *pyReader) keyword() (string, bool) {
	save := r.pos
	name := r.ident()
	r.skipSpace()
	if name == "" || isPyKeyword(name) || r.peek() != '=' || strings.HasPrefix(r.src[r.pos:], "==") {
		r.pos = save
		return "", false
	}
	r.pos++
	return name, true
}

// isPyKeyword reports whether s is one of Python 3's hard keywords, which
// cannot name a function or an argument.
func isPyKeyword(s string) bool {
	switch s {
	case "False", "None", "True", "and", "as", "assert", "async", "await",
		"break", "class", "continue", "def", "del", "elif", "else", "except",
		"finally", "for", "from", "global", "if", "import", "in", "is",
		"lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
		"while", "with", "yield":
		return true
	}
	return false
}
