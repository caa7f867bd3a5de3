package router

import (
	"net/http"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The sinks of Anthropic's Messages API: one choice (the API has no n),
// its text one text block.

// messagesSink writes a message, streamed or whole.
func messagesSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return &messagesStream{out: eventStream{w: w}, id: id, model: model, input: len(req.Prompt.IDs)}
	}
	return &messagesWhole{w: w, id: id, model: model}
}

// messagesStream streams a message as Anthropic does: message_start,
// content_block_start, ping, content_block_delta (text_delta) for each
// piece of text, content_block_stop, message_delta (the stop reason and
// usage), message_stop. The events up to ping go out with the first text
// (or at the end of a message without text), so that a request refused by
// the shared path before any text gets its HTTP status; an error after
// them is an error event.
type messagesStream struct {
	id, model string
	input     int // the prompt's tokens

	out    eventStream
	block  bool // the text block is open
	reason string
}

// begin sends message_start, the text block's start when text is coming,
// and ping.
func (s *messagesStream) begin(text bool) error {
	msg := protocol.NewMessagesResponse(s.id, s.model, nil, nil, protocol.MessagesUsage{InputTokens: s.input})
	if err := s.out.event(protocol.EventMessageStart, protocol.MessageStartEvent{Type: protocol.EventMessageStart, Message: msg}); err != nil {
		return err
	}
	if text {
		s.block = true
		start := protocol.ContentBlockStartEvent{Type: protocol.EventContentBlockStart, ContentBlock: protocol.MessagesBlock{Type: "text"}}
		if err := s.out.event(protocol.EventContentBlockStart, start); err != nil {
			return err
		}
	}
	return s.out.event(protocol.EventPing, protocol.MessagesEvent{Type: protocol.EventPing})
}

func (s *messagesStream) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	if text == "" {
		return nil
	}
	if !s.out.started() {
		if err := s.begin(true); err != nil {
			return err
		}
	}
	return s.out.event(protocol.EventContentBlockDelta, protocol.ContentBlockDeltaEvent{
		Type: protocol.EventContentBlockDelta, Delta: protocol.TextDelta{Type: "text_delta", Text: text}})
}

func (s *messagesStream) flush() {
	s.out.flush()
}

func (s *messagesStream) finish(_ int, reason string) {
	s.reason = reason
}

func (s *messagesStream) done(usage protocol.Usage) {
	defer s.out.flush()
	if !s.out.started() && s.begin(false) != nil {
		return
	}
	if s.block && s.out.event(protocol.EventContentBlockStop, protocol.ContentBlockStopEvent{Type: protocol.EventContentBlockStop}) != nil {
		return
	}
	end := protocol.MessageDeltaEvent{Type: protocol.EventMessageDelta, Delta: protocol.MessageDelta{StopReason: protocol.MessagesStopReason(s.reason)},
		Usage: protocol.MessagesUsage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens}}
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

	text   strings.Builder
	reason string
}

func (m *messagesWhole) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	m.text.WriteString(text)
	return nil
}

func (m *messagesWhole) flush() {}

func (m *messagesWhole) finish(_ int, reason string) {
	m.reason = reason
}

func (m *messagesWhole) done(usage protocol.Usage) {
	var content []protocol.MessagesBlock
	if m.text.Len() > 0 {
		content = []protocol.MessagesBlock{{Type: "text", Text: m.text.String()}}
	}
	reason := protocol.MessagesStopReason(m.reason)
	protocol.WriteJSON(m.w, http.StatusOK, protocol.NewMessagesResponse(m.id, m.model, content, &reason,
		protocol.MessagesUsage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens}))
}

func (m *messagesWhole) fail(err *protocol.Error) { err.WriteAnthropic(m.w) }
