package router

import (
	"net/http"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The sinks of the Responses API: one choice, its text one output_text
// part of one assistant message.

// sink makes the sink of the request's response, streamed or whole.
func (c *responseCall) sink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	a := &responseAnswer{call: c, id: id, model: model, itemID: protocol.NewID("msg_")}
	if req.Stream {
		return &responsesStream{responseAnswer: a, out: eventStream{w: w}}
	}
	return &responsesWhole{responseAnswer: a, w: w}
}

// responseAnswer is the response as it is generated: its text and how it
// ended.
type responseAnswer struct {
	call      *responseCall
	id, model string
	itemID    string

	text   strings.Builder
	reason string
}

// status is the response's (and its message's) status once it ended: a
// text cut by length is incomplete.
func (a *responseAnswer) status() string {
	if a.reason == protocol.FinishLength {
		return protocol.ResponseIncomplete
	}
	return protocol.ResponseCompleted
}

// final is the response done, with usage.
func (a *responseAnswer) final(usage protocol.Usage) protocol.Response {
	item := protocol.NewOutputMessage(a.itemID, a.status(), a.text.String())
	return a.call.response(a.id, a.model, a.status(), []protocol.ResponseMessage{item}, protocol.NewResponseUsage(usage))
}

func (a *responseAnswer) finish(_ int, reason string) {
	a.reason = reason
}

func (a *responseAnswer) flush() {}

// responsesWhole answers the response as one JSON body.
type responsesWhole struct {
	*responseAnswer
	w http.ResponseWriter
}

func (r *responsesWhole) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	r.text.WriteString(text)
	return nil
}

func (r *responsesWhole) done(usage protocol.Usage) {
	final := r.final(usage)
	if e := r.call.save(final); e != nil {
		responsesError(e).Write(r.w)
		return
	}
	protocol.WriteJSON(r.w, http.StatusOK, final)
}

func (r *responsesWhole) fail(err *protocol.Error) { responsesError(err).Write(r.w) }

// responsesStream streams the response as OpenAI does: response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta for each piece
// of text, response.output_text.done, response.content_part.done,
// response.output_item.done, and response.completed (response.incomplete
// when cut by max_output_tokens), numbered by sequence_number. The events
// up to the first delta go out with the first text (or at the end of an
// answer without text), so that a request refused by the shared path
// before any text gets its HTTP status; a failure after them is
// response.failed.
type responsesStream struct {
	*responseAnswer
	out eventStream
	seq int
}

// event sends one event, numbering it. seq is the
// sequence_number field of v, set here.
func (s *responsesStream) event(name string, v any, seq *int) error {
	*seq = s.seq
	s.seq++
	return s.out.event(name, v)
}

// begin sends the events that open the response, its message and its
// part.
func (s *responsesStream) begin() error {
	inProgress := s.call.response(s.id, s.model, protocol.ResponseInProgress, nil, nil)
	for _, name := range []string{protocol.EventResponseCreated, protocol.EventResponseInProgress} {
		e := protocol.ResponseStateEvent{Type: name, Response: inProgress}
		if err := s.event(name, &e, &e.SequenceNumber); err != nil {
			return err
		}
	}
	item := protocol.ResponseMessage{ID: s.itemID, Type: "message", Role: protocol.RoleAssistant, Status: protocol.ResponseInProgress, Content: []protocol.ResponseContent{}}
	added := protocol.ResponseItemEvent{Type: protocol.EventOutputItemAdded, Item: item}
	if err := s.event(added.Type, &added, &added.SequenceNumber); err != nil {
		return err
	}
	part := protocol.ResponsePartEvent{Type: protocol.EventContentPartAdded, ItemID: s.itemID, Part: protocol.ResponseContent{Type: protocol.ContentOutputText}}
	return s.event(part.Type, &part, &part.SequenceNumber)
}

func (s *responsesStream) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	if text == "" {
		return nil
	}
	if !s.out.started() {
		if err := s.begin(); err != nil {
			return err
		}
	}
	s.text.WriteString(text)
	e := protocol.ResponseTextEvent{Type: protocol.EventOutputTextDelta, ItemID: s.itemID, Delta: &text, Logprobs: []struct{}{}}
	return s.event(e.Type, &e, &e.SequenceNumber)
}

func (s *responsesStream) flush() {
	s.out.flush()
}

func (s *responsesStream) done(usage protocol.Usage) {
	defer s.out.flush()
	if !s.out.started() && s.begin() != nil {
		return
	}
	text := s.text.String()
	textDone := protocol.ResponseTextEvent{Type: protocol.EventOutputTextDone, ItemID: s.itemID, Text: &text, Logprobs: []struct{}{}}
	partDone := protocol.ResponsePartEvent{Type: protocol.EventContentPartDone, ItemID: s.itemID, Part: protocol.ResponseContent{Type: protocol.ContentOutputText, Text: text}}
	final := s.final(usage)
	itemDone := protocol.ResponseItemEvent{Type: protocol.EventOutputItemDone, Item: final.Output[0]}
	last := protocol.ResponseStateEvent{Type: protocol.EventResponseCompleted, Response: final}
	if final.Status == protocol.ResponseIncomplete {
		last.Type = protocol.EventResponseIncomplete
	}
	if s.event(textDone.Type, &textDone, &textDone.SequenceNumber) != nil ||
		s.event(partDone.Type, &partDone, &partDone.SequenceNumber) != nil ||
		s.event(itemDone.Type, &itemDone, &itemDone.SequenceNumber) != nil {
		return
	}
	// Stored before the last event: a client that continues the
	// conversation as soon as it has it finds it.
	if e := s.call.save(final); e != nil {
		s.failed(e)
		return
	}
	_ = s.event(last.Type, &last, &last.SequenceNumber)
}

func (s *responsesStream) fail(err *protocol.Error) {
	if !s.out.started() {
		responsesError(err).Write(s.out.w)
		return
	}
	s.failed(err)
}

// failed ends a stream that began with response.failed.
func (s *responsesStream) failed(err *protocol.Error) {
	// Events went out: the status is gone, so the response fails in its
	// last event, with what it had generated.
	item := protocol.NewOutputMessage(s.itemID, protocol.ResponseIncomplete, s.text.String())
	failed := s.call.response(s.id, s.model, protocol.ResponseFailed, []protocol.ResponseMessage{item}, nil)
	failed.Error = &protocol.ResponseError{Code: "server_error", Message: err.Message}
	e := protocol.ResponseStateEvent{Type: protocol.EventResponseFailed, Response: failed}
	_ = s.event(e.Type, &e, &e.SequenceNumber)
	s.out.flush()
}
