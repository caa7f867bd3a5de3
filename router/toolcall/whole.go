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
	startLen   int // how much of the start couldStart needs to see
	limit      int
	buf        []byte
	through    bool // the output is known to be content; pass text on
	lead       int  // leading space bytes seen
	startSure  bool // the start has been seen whole and may be a call
}

// startLen is how much of the output's start a format's couldStart needs
// to see, unless it says more: the longest marker, <|python_tag|>, fits
// in it.
const startLen = 16

func newWhole(couldStart func(string) bool, parse func(string) ([]Call, bool), limit int) *whole {
	return &whole{couldStart: couldStart, parse: parse, startLen: startLen, limit: limit}
}

func (p *whole) Push(text string) []Event {
	if p.through {
		return textEvent(nil, text)
	}
	p.buf = append(p.buf, text...)
	if len(p.buf) > p.limit || !p.startOK() {
		return p.release()
	}
	return nil
}

// startOK reports whether the output's start may still be a call. Only the
// first p.startLen bytes after the leading space decide, so once they have
// been seen and passed there is nothing left to check, and a Push costs
// its own length, not the output's.
func (p *whole) startOK() bool {
	if p.startSure {
		return true
	}
	for p.lead < len(p.buf) && strings.IndexByte(spaceChars, p.buf[p.lead]) >= 0 {
		p.lead++
	}
	t := p.buf[p.lead:]
	if len(t) == 0 {
		return true
	}
	if !p.couldStart(string(t[:min(len(t), p.startLen)])) {
		return false
	}
	p.startSure = len(t) >= p.startLen
	return true
}

// release gives up holding: all held text goes out and the rest streams.
func (p *whole) release() []Event {
	evs := textEvent(nil, string(p.buf))
	p.buf, p.through = nil, true
	return evs
}

func (p *whole) End() []Event {
	if p.through || len(p.buf) == 0 {
		return nil
	}
	out := string(p.buf)
	p.buf = nil
	if calls, ok := p.parse(out); ok {
		return callEvents(nil, calls)
	}
	return textEvent(nil, out)
}

// spaceChars is the whitespace the formats allow around their markup.
const spaceChars = " \t\r\n\f\v"
