package toolcall

import "strings"

// pythonicCouldStart reports whether output (left-trimmed, non-empty) may
// still be a pythonic call list.
func pythonicCouldStart(t string) bool { return t[0] == '[' }

// parsePythonic reads the whole output, trimmed, as [f(a=1), g()]: a list
// of calls with keyword arguments only, as vLLM's pythonic parser reads it.
// All or nothing; an empty list is no call.
func parsePythonic(output string) ([]Call, bool) {
	r := &pyReader{src: strings.TrimSpace(output)}
	if r.peek() != '[' || !r.open() {
		return nil, false
	}
	var calls []Call
	ok := r.seq(']', func() bool {
		c, ok := r.call(false)
		calls = append(calls, c)
		return ok
	})
	return calls, ok && len(calls) > 0 && r.pos == len(r.src)
}
