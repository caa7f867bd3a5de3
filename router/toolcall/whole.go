package toolcall

import "strings"

// whole is the streaming machine for formats where the whole output is the
// call list (llama3_json, pythonic, mlc): all or nothing. It holds the output
// while its start could be a call and parses it at End; once the start
// rules a call out, or the held text outgrows the limit, everything held is
// released and the rest streams on as text.
type whole struct {
	couldStart func(trimmed string) bool
	parse      func(output string) ([]Call, bool)
	limit      int
	buf        string
	through    bool // the output is known to be content; pass text on
}

func newWhole(couldStart func(string) bool, parse func(string) ([]Call, bool), limit int) *whole {
	return &whole{couldStart: couldStart, parse: parse, limit: limit}
}

func (p *whole) Push(text string) []Event {
	if p.through {
		return textEvent(nil, text)
	}
	p.buf += text
	t := strings.TrimLeft(p.buf, spaceChars)
	if len(p.buf) > p.limit || (t != "" && !p.couldStart(t)) {
		return p.release()
	}
	return nil
}

// release gives up holding: all held text goes out and the rest streams.
func (p *whole) release() []Event {
	evs := textEvent(nil, p.buf)
	p.buf, p.through = "", true
	return evs
}

func (p *whole) End() []Event {
	if p.through || p.buf == "" {
		return nil
	}
	out := p.buf
	p.buf = ""
	if calls, ok := p.parse(out); ok {
		return callEvents(nil, calls)
	}
	return textEvent(nil, out)
}

// spaceChars is the whitespace the formats allow around their markup.
const spaceChars = " \t\r\n\f\v"
