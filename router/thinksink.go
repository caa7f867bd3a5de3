package router

import (
	"strings"
	"unicode"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// thoughtSink is a sink that can write the model's reasoning apart from
// its answer: the Messages API's thinking blocks.
type thoughtSink interface {
	sink
	// thought delivers a piece of choice index's reasoning.
	thought(index int, text string) error
}

// Reasoning markers: a model whose template has a thinking switch
// (Qwen3's enable_thinking) writes its reasoning first, between them.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkingSink reads each choice's reasoning off the front of its text
// (white space, then <think>…</think>) and hands it to the API's sink as
// thoughts; the text after it, less the white space that follows
// </think>, goes on as the answer. A text that does not begin with
// <think> is all answer. Like toolCallSink, it reads the text the client
// gets, so that attempts change nothing of it, and holds only what could
// still be a marker.
type thinkingSink struct {
	out    sink // a thoughtSink, or a toolCallSink in front of one
	states []thinkState
}

// thinkState is where a choice's text is: before its reasoning began
// (held: what came so far), inside it (held: what could begin
// </think>), or past it.
type thinkState struct {
	phase int // thinkBefore, thinkIn, thinkAfter (trimming), thinkDone
	held  string
}

const (
	thinkBefore = iota
	thinkIn
	thinkAfter
	thinkDone
)

func newThinkingSink(out sink, n int) *thinkingSink {
	return &thinkingSink{out: out, states: make([]thinkState, n)}
}

// thought hands reasoning to the sink that writes it.
func (s *thinkingSink) thought(index int, text string) error {
	if text == "" {
		return nil
	}
	if t, ok := s.out.(thoughtSink); ok {
		return t.thought(index, text)
	}
	return nil
}

func (s *thinkingSink) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	st := &s.states[index]
	for text != "" {
		switch st.phase {
		case thinkBefore:
			st.held += text
			text = ""
			lead := strings.TrimLeftFunc(st.held, unicode.IsSpace)
			switch {
			case strings.HasPrefix(lead, thinkOpen):
				st.phase, text, st.held = thinkIn, lead[len(thinkOpen):], ""
			case !strings.HasPrefix(thinkOpen, lead):
				st.phase, text, st.held = thinkDone, st.held, ""
			}
		case thinkIn:
			st.held += text
			text = ""
			if i := strings.Index(st.held, thinkClose); i >= 0 {
				if err := s.thought(index, st.held[:i]); err != nil {
					return err
				}
				st.phase, text, st.held = thinkAfter, st.held[i+len(thinkClose):], ""
				continue
			}
			keep := heldMarker(st.held, thinkClose)
			if err := s.thought(index, st.held[:len(st.held)-keep]); err != nil {
				return err
			}
			st.held = st.held[len(st.held)-keep:]
		case thinkAfter:
			if text = strings.TrimLeftFunc(text, unicode.IsSpace); text != "" {
				st.phase = thinkDone
			}
		case thinkDone:
			return s.out.delta(index, text, logprobs)
		}
	}
	return nil
}

// heldMarker is the length of the longest end of s that begins marker.
func heldMarker(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

func (s *thinkingSink) flush() { s.out.flush() }

// finish releases what was held: reasoning never closed is reasoning,
// a text that could still have begun <think> is answer.
func (s *thinkingSink) finish(index int, reason string) {
	st := &s.states[index]
	var err error
	switch {
	case st.phase == thinkBefore && st.held != "":
		err = s.out.delta(index, st.held, nil)
	case st.phase == thinkIn:
		err = s.thought(index, st.held)
	}
	st.held = ""
	if err == nil {
		s.out.finish(index, reason)
	}
}

func (s *thinkingSink) done(usage protocol.Usage) { s.out.done(usage) }

func (s *thinkingSink) fail(err *protocol.Error) { s.out.fail(err) }
