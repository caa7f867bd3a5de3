package toolcall

import (
	"bytes"
	"strings"
)

// tagged is the streaming machine for formats whose calls start with a
// marker in the middle of content: hermes (<tool_call>…</tool_call>) and
// mistral ([TOOL_CALLS]… to the end). Text is released as soon as it cannot
// be the marker's start; from the marker on, text is held until the close
// marker (or End, when close is empty) and then parsed as a whole.
type tagged struct {
	open, close string
	parse       func(body string) ([]Call, bool)
	limit       int
	buf         []byte // held text; starts with open when inCall
	inCall      bool
	// searched is how far into buf the close marker is known to be absent,
	// so each piece is searched once, not the whole call on every Push.
	searched int
}

func newTagged(open, close string, parse func(string) ([]Call, bool), limit int) *tagged {
	return &tagged{open: open, close: close, parse: parse, limit: limit}
}

func (p *tagged) Push(text string) []Event {
	p.buf = append(p.buf, text...)
	var evs []Event
	for {
		var more bool
		if p.inCall {
			evs, more = p.stepCall(evs)
		} else {
			evs, more = p.stepText(evs)
		}
		if !more {
			return evs
		}
	}
}

// stepText releases text up to the open marker, or all of it but a suffix
// that may still become the marker. It reports whether a call began.
func (p *tagged) stepText(evs []Event) ([]Event, bool) {
	if i := bytes.Index(p.buf, []byte(p.open)); i >= 0 {
		evs = textEvent(evs, string(p.buf[:i]))
		p.buf, p.inCall, p.searched = p.buf[i:], true, len(p.open)
		return evs, true
	}
	keep := partialSuffix(p.buf, p.open)
	evs = textEvent(evs, string(p.buf[:len(p.buf)-keep]))
	p.buf = append(p.buf[:0], p.buf[len(p.buf)-keep:]...)
	return evs, false
}

// stepCall finishes the call in progress when its close marker has come,
// or gives it up as text when it outgrows the limit. The decision depends
// only on the text, never on how it was split into pieces.
func (p *tagged) stepCall(evs []Event) ([]Event, bool) {
	end := -1
	if p.close != "" {
		if j := bytes.Index(p.buf[p.searched:], []byte(p.close)); j >= 0 {
			end = p.searched + j + len(p.close)
		} else {
			p.searched = max(p.searched, len(p.buf)-len(p.close)+1)
		}
	}
	switch {
	case end >= 0 && end <= p.limit:
		evs = p.finish(evs, string(p.buf[:end]))
		p.buf, p.inCall = p.buf[end:], false
		return evs, true
	case len(p.buf) > p.limit:
		evs = textEvent(evs, string(p.buf[:p.limit]))
		p.buf, p.inCall = p.buf[p.limit:], false
		return evs, true
	}
	return evs, false
}

// finish turns one call's whole markup into calls, or into text when the
// body is not a valid call.
func (p *tagged) finish(evs []Event, markup string) []Event {
	body := strings.TrimPrefix(markup, p.open)
	body = strings.TrimSuffix(body, p.close)
	if calls, ok := p.parse(body); ok {
		return callEvents(evs, calls)
	}
	return textEvent(evs, markup)
}

func (p *tagged) End() []Event {
	var evs []Event
	if p.inCall {
		// An unclosed call: what follows the marker may still be a whole one.
		evs = p.finish(evs, string(p.buf))
	} else {
		evs = textEvent(evs, string(p.buf))
	}
	p.buf, p.inCall = nil, false
	return evs
}

// partialSuffix returns the length of the longest suffix of s that is a
// proper prefix of tag: the bytes that may yet become tag.
func partialSuffix(s []byte, tag string) int {
	n := min(len(s), len(tag)-1)
	for ; n > 0; n-- {
		if bytes.HasSuffix(s, []byte(tag[:n])) {
			return n
		}
	}
	return 0
}
