package router

import (
	"net/http"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The sinks of the Responses API: one choice, its text one output_text
// part of one assistant message.

// sink makes the sink of the request's response, streamed or whole; a
// later round of the answer (hosted tools) writes to the first's.
func (c *responseCall) sink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if c.out != nil {
		return c.out
	}
	a := &responseAnswer{rc: c, id: id, model: model}
	if req.Stream {
		c.out = &responsesStream{responseAnswer: a, out: eventStream{w: w}, input: len(req.Prompt.IDs)}
	} else {
		a.items = c.hostedPre()
		c.out = &responsesWhole{responseAnswer: a, w: w}
	}
	return c.out
}

// responseAnswer is the response as it is generated: its output items
// (the assistant's message, the function calls) and how it ended.
type responseAnswer struct {
	rc        *responseCall
	id, model string

	items  []protocol.ResponseMessage // output items done
	itemID string                     // of the message being written; "" when none is
	text   strings.Builder            // its text
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

// openMessage begins the message item that text goes to.
func (a *responseAnswer) openMessage() {
	a.itemID = protocol.NewID("msg_")
	a.text.Reset()
}

// closeMessage ends the message being written, with status, as an output
// item; it returns the item.
func (a *responseAnswer) closeMessage(status string) protocol.ResponseMessage {
	item := protocol.NewOutputMessage(a.itemID, status, a.text.String())
	a.items = append(a.items, item)
	a.itemID = ""
	return item
}

// newCall is a function_call output item.
func newCall(name, arguments, status string) protocol.ResponseMessage {
	return protocol.NewFunctionCall(protocol.NewID("fc_"), protocol.NewID("call_"), name, arguments, status)
}

// final is the response done, with usage: its items, the message being
// written last; an answer of nothing is one empty message.
func (a *responseAnswer) final(usage protocol.Usage) protocol.Response {
	if a.itemID == "" && len(a.items) == 0 {
		a.openMessage()
	}
	if a.itemID != "" {
		a.closeMessage(a.status())
	}
	return a.rc.response(a.id, a.model, a.status(), a.items, protocol.NewResponseUsage(a.rc.usageOf(usage)))
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
	if text == "" {
		return nil
	}
	if r.itemID == "" {
		r.openMessage()
	}
	r.text.WriteString(text)
	return nil
}

func (r *responsesWhole) call(_ int, name, arguments string) error {
	if fn := r.rc.hostedFn(name); fn != nil {
		return r.rc.hostedCall(r, fn, arguments)
	}
	if r.itemID != "" {
		r.closeMessage(protocol.ResponseCompleted)
	}
	r.items = append(r.items, newCall(name, arguments, protocol.ResponseCompleted))
	return nil
}

func (r *responsesWhole) done(usage protocol.Usage) {
	if r.rc.holds(r.responseAnswer, usage) {
		r.endOpen()
		return
	}
	final := r.final(usage)
	if e := r.rc.save(final); e != nil {
		responsesError(e).Write(r.w)
		return
	}
	protocol.WriteJSON(r.w, http.StatusOK, final)
}

func (r *responsesWhole) fail(err *protocol.Error) { responsesError(err).Write(r.w) }

// responsesStream streams the response as OpenAI does: response.created,
// response.in_progress, then each output item — a message
// (response.output_item.added, response.content_part.added,
// response.output_text.delta for each piece of text,
// response.output_text.done, response.content_part.done,
// response.output_item.done) or a function call
// (response.output_item.added, response.function_call_arguments.delta
// for each piece of its arguments, response.function_call_arguments.done,
// response.output_item.done) — and response.completed
// (response.incomplete when cut by max_output_tokens), numbered by
// sequence_number. The events up to the first item's go out with the
// first text or call (or at the end of an answer without either), so
// that a request refused by the shared path before any gets its HTTP
// status; a failure after them is response.failed.
type responsesStream struct {
	*responseAnswer
	out eventStream
	seq int
	// input is the prompt's tokens; early the usage response.created
	// says, once the cached tokens are known before the first token (see
	// cachedtokens.go), nil before.
	input int
	early *protocol.ResponseUsage
}

// announceCached takes the cached tokens known before the first token.
func (s *responsesStream) announceCached(tokens int) {
	s.early = protocol.NewResponseUsage(protocol.Usage{PromptTokens: s.input, TotalTokens: s.input}.WithCached(tokens))
}

// event sends one event, numbering it. seq is the
// sequence_number field of v, set here.
func (s *responsesStream) event(name string, v any, seq *int) error {
	*seq = s.seq
	s.seq++
	return s.out.event(name, v)
}

// begin sends the events that open the response.
func (s *responsesStream) begin() error {
	inProgress := s.rc.response(s.id, s.model, protocol.ResponseInProgress, nil, s.early)
	for _, name := range []string{protocol.EventResponseCreated, protocol.EventResponseInProgress} {
		e := protocol.ResponseStateEvent{Type: name, Response: inProgress}
		if err := s.event(name, &e, &e.SequenceNumber); err != nil {
			return err
		}
	}
	return s.replayHosted()
}

// added sends an output item's output_item.added, after the response's
// opening events.
func (s *responsesStream) added(item protocol.ResponseMessage) error {
	if !s.out.started() {
		if err := s.begin(); err != nil {
			return err
		}
	}
	e := protocol.ResponseItemEvent{Type: protocol.EventOutputItemAdded, OutputIndex: len(s.items), Item: item}
	return s.event(e.Type, &e, &e.SequenceNumber)
}

// startMessage opens a message item and its text part.
func (s *responsesStream) startMessage() error {
	s.openMessage()
	item := protocol.ResponseMessage{ID: s.itemID, Type: protocol.ItemMessage, Role: protocol.RoleAssistant, Status: protocol.ResponseInProgress, Content: []protocol.ResponseContent{}}
	if err := s.added(item); err != nil {
		return err
	}
	part := protocol.ResponsePartEvent{Type: protocol.EventContentPartAdded, ItemID: s.itemID, OutputIndex: len(s.items), Part: protocol.ResponseContent{Type: protocol.ContentOutputText}}
	return s.event(part.Type, &part, &part.SequenceNumber)
}

// endMessage closes the message being written: its text, part and item
// done.
func (s *responsesStream) endMessage(status string) error {
	index, text := len(s.items), s.text.String()
	textDone := protocol.ResponseTextEvent{Type: protocol.EventOutputTextDone, ItemID: s.itemID, OutputIndex: index, Text: &text, Logprobs: []struct{}{}}
	partDone := protocol.ResponsePartEvent{Type: protocol.EventContentPartDone, ItemID: s.itemID, OutputIndex: index, Part: protocol.ResponseContent{Type: protocol.ContentOutputText, Text: text}}
	itemDone := protocol.ResponseItemEvent{Type: protocol.EventOutputItemDone, OutputIndex: index, Item: s.closeMessage(status)}
	if err := s.event(textDone.Type, &textDone, &textDone.SequenceNumber); err != nil {
		return err
	}
	if err := s.event(partDone.Type, &partDone, &partDone.SequenceNumber); err != nil {
		return err
	}
	return s.event(itemDone.Type, &itemDone, &itemDone.SequenceNumber)
}

func (s *responsesStream) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	if text == "" {
		return nil
	}
	if s.itemID == "" {
		if err := s.startMessage(); err != nil {
			return err
		}
	}
	s.text.WriteString(text)
	e := protocol.ResponseTextEvent{Type: protocol.EventOutputTextDelta, ItemID: s.itemID, OutputIndex: len(s.items), Delta: &text, Logprobs: []struct{}{}}
	return s.event(e.Type, &e, &e.SequenceNumber)
}

// call sends a function_call item: added (no arguments yet), its
// arguments in pieces and whole, done.
func (s *responsesStream) call(_ int, name, arguments string) error {
	if fn := s.rc.hostedFn(name); fn != nil {
		return s.rc.hostedCall(s, fn, arguments)
	}
	if s.itemID != "" {
		if err := s.endMessage(protocol.ResponseCompleted); err != nil {
			return err
		}
	}
	item := newCall(name, "", protocol.ResponseInProgress)
	if err := s.added(item); err != nil {
		return err
	}
	index := len(s.items)
	for _, piece := range argumentPieces(arguments) {
		e := protocol.ResponseArgumentsEvent{Type: protocol.EventArgumentsDelta, ItemID: item.ID, OutputIndex: index, Delta: &piece}
		if err := s.event(e.Type, &e, &e.SequenceNumber); err != nil {
			return err
		}
	}
	argsDone := protocol.ResponseArgumentsEvent{Type: protocol.EventArgumentsDone, ItemID: item.ID, OutputIndex: index, Arguments: &arguments}
	if err := s.event(argsDone.Type, &argsDone, &argsDone.SequenceNumber); err != nil {
		return err
	}
	item.Arguments, item.Status = arguments, protocol.ResponseCompleted
	s.items = append(s.items, item)
	itemDone := protocol.ResponseItemEvent{Type: protocol.EventOutputItemDone, OutputIndex: index, Item: item}
	return s.event(itemDone.Type, &itemDone, &itemDone.SequenceNumber)
}

func (s *responsesStream) flush() {
	s.out.flush()
}

func (s *responsesStream) done(usage protocol.Usage) {
	defer s.out.flush()
	if s.rc.holds(s.responseAnswer, usage) {
		_ = s.endOpen()
		return
	}
	if s.itemID == "" && len(s.items) == 0 && s.startMessage() != nil {
		return
	}
	if s.itemID != "" && s.endMessage(s.status()) != nil {
		return
	}
	final := s.final(usage)
	last := protocol.ResponseStateEvent{Type: protocol.EventResponseCompleted, Response: final}
	if final.Status == protocol.ResponseIncomplete {
		last.Type = protocol.EventResponseIncomplete
	}
	// Stored before the last event: a client that continues the
	// conversation as soon as it has it finds it.
	if e := s.rc.save(final); e != nil {
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
	if s.itemID != "" {
		s.closeMessage(protocol.ResponseIncomplete)
	}
	failed := s.rc.response(s.id, s.model, protocol.ResponseFailed, s.items, nil)
	failed.Error = &protocol.ResponseError{Code: "server_error", Message: err.Message}
	e := protocol.ResponseStateEvent{Type: protocol.EventResponseFailed, Response: failed}
	_ = s.event(e.Type, &e, &e.SequenceNumber)
	s.out.flush()
}
