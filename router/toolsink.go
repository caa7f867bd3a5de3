package router

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/toolcall"
)

// callSink is a sink that can write tool calls as its API shapes them:
// chat's tool_calls, the Messages API's tool_use blocks, the Responses
// API's function_call items.
type callSink interface {
	sink
	// call delivers one whole call of choice index: the function's name
	// and its arguments, a JSON object's text. The sink gives it an id
	// and streams the arguments in pieces (argumentPieces).
	call(index int, name, arguments string) error
}

// toolCallSink reads each choice's text for tool calls with the model's
// parser (router/toolcall) before its API's sink sees it: text that is
// not a call goes on as text, a call once it is whole and valid goes on
// as a call, and a choice that stopped after calling finishes with
// tool_calls. It sits behind outcomeSink, which serialises it; it sees
// the text the client gets (after stop strings, resumed attempts
// joined), so that how a request was split, routed or resumed changes
// nothing of what it reads.
type toolCallSink struct {
	out     callSink
	parsers []toolcall.Parser
	called  []int    // calls of each choice
	space   []string // each choice's white space held: dropped beside a call
	counter prometheus.Counter
}

// newToolCallSink reads n choices' text with format's parser; a format
// it does not know (never: the router checks it when it is made) leaves
// the text as text.
func newToolCallSink(out callSink, format string, n int, counter prometheus.Counter) sink {
	s := &toolCallSink{out: out, parsers: make([]toolcall.Parser, n), called: make([]int, n), space: make([]string, n), counter: counter}
	for i := range s.parsers {
		p, err := toolcall.New(format)
		if err != nil {
			return out
		}
		s.parsers[i] = p
	}
	return s
}

// emit hands the parser's events of choice index to the API's sink.
// The white space that ends a text is held until more text follows it,
// and dropped when a call or the end of a choice that called does: the
// new lines around and between a model's calls are their layout, not
// content. (Held by characters, not by events, so that how the engines
// cut the text changes nothing.) Logprobs go with the text only when it
// passed through whole: text the parser held and released later has
// none.
func (s *toolCallSink) emit(index int, events []toolcall.Event, text string, logprobs *protocol.CompletionLogprobs) error {
	for _, ev := range events {
		if ev.Call != nil {
			s.space[index] = ""
			s.called[index]++
			if s.counter != nil {
				s.counter.Inc()
			}
			if err := s.out.call(index, ev.Call.Name, ev.Call.Arguments); err != nil {
				return err
			}
			continue
		}
		body := strings.TrimRightFunc(ev.Text, unicode.IsSpace)
		if body == "" {
			s.space[index] += ev.Text
			continue
		}
		var lp *protocol.CompletionLogprobs
		if len(events) == 1 && ev.Text == text && s.space[index] == "" && body == ev.Text {
			lp = logprobs
		}
		out := s.space[index] + body
		s.space[index] = ev.Text[len(body):]
		if err := s.out.delta(index, out, lp); err != nil {
			return err
		}
	}
	return nil
}

func (s *toolCallSink) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	return s.emit(index, s.parsers[index].Push(text), text, logprobs)
}

func (s *toolCallSink) flush() { s.out.flush() }

// thought passes reasoning on, when the API's sink writes it.
func (s *toolCallSink) thought(index int, text string) error {
	if t, ok := s.out.(thoughtSink); ok {
		return t.thought(index, text)
	}
	return nil
}

// finish releases what the parser held and ends the choice: one that
// stopped after calling ends with tool_calls; one cut by length keeps
// its reason (a call it was writing is text, or none).
func (s *toolCallSink) finish(index int, reason string) {
	if s.emit(index, s.parsers[index].End(), "", nil) != nil {
		return
	}
	if s.called[index] == 0 && s.space[index] != "" && s.out.delta(index, s.space[index], nil) != nil {
		return
	}
	s.space[index] = ""
	if reason == protocol.FinishStop && s.called[index] > 0 {
		reason = protocol.FinishToolCalls
	}
	s.out.finish(index, reason)
}

func (s *toolCallSink) done(usage protocol.Usage) { s.out.done(usage) }

func (s *toolCallSink) fail(err *protocol.Error) { s.out.fail(err) }

// argumentPiece is the most bytes of a call's arguments one streamed
// event carries: clients join the pieces, as they join OpenAI's.
const argumentPiece = 64

// argumentPieces splits a call's arguments into pieces of at most
// argumentPiece bytes, cut between runes.
func argumentPieces(args string) []string {
	var out []string
	for len(args) > argumentPiece {
		cut := argumentPiece
		for cut > 0 && !utf8.RuneStart(args[cut]) {
			cut--
		}
		out = append(out, args[:cut])
		args = args[cut:]
	}
	return append(out, args)
}
