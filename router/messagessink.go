package router

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The sinks of Anthropic's Messages API: one choice (the API has no n),
// its text one text block.

// messagesSink writes a message, streamed or whole.
func messagesSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return &messagesStream{out: eventStream{w: w}, id: id, model: model, input: len(req.Prompt.IDs), cached: -1}
	}
	return &messagesWhole{w: w, id: id, model: model}
}

// messagesStream streams a message as Anthropic does: message_start,
// then each content block (content_block_start, its deltas — text_delta
// for text, input_json_delta for a tool_use's input — and
// content_block_stop; a ping after the first block's start),
// message_delta (the stop reason and usage), message_stop. The events
// up to the first block's go out with the first text or call (or at the
// end of a message without either), so that a request refused by the
// shared path before any gets its HTTP status; an error after them is an
// error event.
type messagesStream struct {
	id, model string
	input     int // the prompt's tokens
	cached    int // of them, cached as known before the first token; -1 unknown

	out    eventStream
	blocks int    // blocks started
	open   string // the type of the last block started, while it is open (text or thinking)
	pinged bool
	reason string
}

// begin sends message_start, with the cached tokens known by then (see
// cachedtokens.go).
func (s *messagesStream) begin() error {
	usage := protocol.Usage{PromptTokens: s.input}.WithCached(s.cached)
	msg := protocol.NewMessagesResponse(s.id, s.model, nil, nil, protocol.NewMessagesUsage(usage))
	return s.out.event(protocol.EventMessageStart, protocol.MessageStartEvent{Type: protocol.EventMessageStart, Message: msg})
}

// announceCached takes the cached tokens known before the first token.
func (s *messagesStream) announceCached(tokens int) { s.cached = tokens }

// start opens block b as the next block, after closing an open text
// block; the message starts first, and a ping follows the first block's
// start.
func (s *messagesStream) start(b protocol.MessagesBlock) error {
	if !s.out.started() {
		if err := s.begin(); err != nil {
			return err
		}
	}
	if err := s.closeOpen(); err != nil {
		return err
	}
	start := protocol.ContentBlockStartEvent{Type: protocol.EventContentBlockStart, Index: s.blocks, ContentBlock: b}
	s.blocks++
	if err := s.out.event(protocol.EventContentBlockStart, start); err != nil {
		return err
	}
	return s.ping()
}

// ping sends the stream's one ping, once.
func (s *messagesStream) ping() error {
	if s.pinged {
		return nil
	}
	s.pinged = true
	return s.out.event(protocol.EventPing, protocol.MessagesEvent{Type: protocol.EventPing})
}

// closeOpen ends the open text or thinking block, if any.
func (s *messagesStream) closeOpen() error {
	if s.open == "" {
		return nil
	}
	s.open = ""
	return s.stop()
}

// openBlock makes sure a block of typ is open, starting one.
func (s *messagesStream) openBlock(typ string) error {
	if s.open == typ {
		return nil
	}
	if err := s.start(protocol.MessagesBlock{Type: typ}); err != nil {
		return err
	}
	s.open = typ
	return nil
}

// stop ends the last block started.
func (s *messagesStream) stop() error {
	return s.out.event(protocol.EventContentBlockStop, protocol.ContentBlockStopEvent{Type: protocol.EventContentBlockStop, Index: s.blocks - 1})
}

func (s *messagesStream) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	if text == "" {
		return nil
	}
	if err := s.openBlock(protocol.BlockText); err != nil {
		return err
	}
	return s.out.event(protocol.EventContentBlockDelta, protocol.ContentBlockDeltaEvent{
		Type: protocol.EventContentBlockDelta, Index: s.blocks - 1, Delta: protocol.TextDelta{Type: "text_delta", Text: text}})
}

// thought sends a piece of the model's reasoning in a thinking block.
func (s *messagesStream) thought(_ int, text string) error {
	if err := s.openBlock(protocol.BlockThinking); err != nil {
		return err
	}
	return s.out.event(protocol.EventContentBlockDelta, protocol.ContentBlockDeltaEvent{
		Type: protocol.EventContentBlockDelta, Index: s.blocks - 1, Delta: protocol.ThinkingDelta{Type: "thinking_delta", Thinking: text}})
}

// call sends a tool_use block: its start (id, name, an empty input),
// its input in input_json_delta pieces, its stop.
func (s *messagesStream) call(_ int, name, arguments string) error {
	if err := s.start(protocol.MessagesBlock{Type: protocol.BlockToolUse, ID: protocol.NewID("toolu_"), Name: name}); err != nil {
		return err
	}
	for _, piece := range argumentPieces(arguments) {
		d := protocol.ContentBlockDeltaEvent{Type: protocol.EventContentBlockDelta, Index: s.blocks - 1,
			Delta: protocol.InputJSONDelta{Type: "input_json_delta", PartialJSON: piece}}
		if err := s.out.event(protocol.EventContentBlockDelta, d); err != nil {
			return err
		}
	}
	return s.stop()
}

func (s *messagesStream) flush() {
	s.out.flush()
}

func (s *messagesStream) finish(_ int, reason string) {
	s.reason = reason
}

func (s *messagesStream) done(usage protocol.Usage) {
	defer s.out.flush()
	if !s.out.started() && (s.begin() != nil || s.ping() != nil) {
		return
	}
	if s.closeOpen() != nil {
		return
	}
	end := protocol.MessageDeltaEvent{Type: protocol.EventMessageDelta, Delta: protocol.MessageDelta{StopReason: protocol.MessagesStopReason(s.reason)},
		Usage: protocol.NewMessagesUsage(usage)}
	if s.out.event(protocol.EventMessageDelta, end) != nil {
		return
	}
	_ = s.out.event(protocol.EventMessageStop, protocol.MessagesEvent{Type: protocol.EventMessageStop})
}

func (s *messagesStream) fail(err *protocol.Error) {
	if !s.out.started() {
		err.WriteAnthropic(s.out.w)
		return
	}
	// Events went out: the status is gone, so the error is the last event.
	_ = s.out.event(protocol.EventError, err.Anthropic())
	s.out.flush()
}

// messagesWhole answers a message as one JSON body.
type messagesWhole struct {
	w         http.ResponseWriter
	id, model string

	blocks   []protocol.MessagesBlock
	text     strings.Builder // of the text block being written
	thinking strings.Builder // of the thinking block being written
	reason   string
}

func (m *messagesWhole) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	if text != "" {
		m.endThinking()
	}
	m.text.WriteString(text)
	return nil
}

func (m *messagesWhole) thought(_ int, text string) error {
	m.thinking.WriteString(text)
	return nil
}

// endThinking ends the thinking block being written, if any.
func (m *messagesWhole) endThinking() {
	if m.thinking.Len() > 0 {
		m.blocks = append(m.blocks, protocol.MessagesBlock{Type: protocol.BlockThinking, Thinking: m.thinking.String()})
		m.thinking.Reset()
	}
}

// endText ends the text block being written, if any.
func (m *messagesWhole) endText() {
	m.endThinking()
	if m.text.Len() > 0 {
		m.blocks = append(m.blocks, protocol.MessagesBlock{Type: protocol.BlockText, Text: m.text.String()})
		m.text.Reset()
	}
}

func (m *messagesWhole) call(_ int, name, arguments string) error {
	m.endText()
	m.blocks = append(m.blocks, protocol.MessagesBlock{Type: protocol.BlockToolUse, ID: protocol.NewID("toolu_"), Name: name, Input: json.RawMessage(arguments)})
	return nil
}

func (m *messagesWhole) flush() {}

func (m *messagesWhole) finish(_ int, reason string) {
	m.reason = reason
}

func (m *messagesWhole) done(usage protocol.Usage) {
	m.endText()
	reason := protocol.MessagesStopReason(m.reason)
	protocol.WriteJSON(m.w, http.StatusOK, protocol.NewMessagesResponse(m.id, m.model, m.blocks, &reason,
		protocol.NewMessagesUsage(usage)))
}

func (m *messagesWhole) fail(err *protocol.Error) { err.WriteAnthropic(m.w) }
