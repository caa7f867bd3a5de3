package router

import (
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The sinks write a request's answer to its client, as its API has it
// (completions or chat completions, streamed or whole), through a writer
// that lets a client go that stops reading.

// sink receives what the client is to see of a completion: text pieces and
// the end of each choice. Implementations format it as a completion or a
// chat completion, streamed or whole. The choices' goroutines call it
// through one outcomeSink, which serialises them: implementations hold no
// lock of their own.
type sink interface {
	// delta delivers text of choice index, with the logprobs of the
	// tokens it completes (nil when the request did not ask for them). An
	// error means the client is gone. A streaming sink may hold it until
	// flush.
	delta(index int, text string, logprobs *protocol.CompletionLogprobs) error
	// flush sends the deltas held: the caller has no more at hand. Like
	// reverse_proxy, which writes whatever one read brought, the router
	// coalesces what the engine sent at once into one write.
	flush()
	// finish ends choice index.
	finish(index int, reason string)
	// done ends the response with the usage of the whole request.
	done(usage protocol.Usage)
	// fail ends the response with an error.
	fail(err *protocol.Error)
}

// sinkMaker makes the sink that writes one API's answer to a request.
type sinkMaker func(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink

// completionSink writes a completion, streamed or whole.
func completionSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return newCompletionStream(w, id, model, req.IncludeUsage())
	}
	return newCompletionWhole(w, id, model, req.NOr(), req.Logprobs != nil)
}

// errClientGone is returned by a sink whose client stopped reading.
var errClientGone = errors.New("client gone")

// completionStream streams a completion to the client as server-sent
// events. Headers are written with the first event, so a request that
// fails before any text still gets a plain HTTP error.
type completionStream struct {
	w            http.ResponseWriter
	id, model    string
	created      int64
	includeUsage bool

	sse     *protocol.SSEWriter
	broken  bool // the client stopped reading
	written bool
	// text writes the chunks that carry only text, the most frequent,
	// without reflection; buf is its buffer.
	text *protocol.TextChunkEncoder
	buf  []byte
}

func newCompletionStream(w http.ResponseWriter, id, model string, includeUsage bool) *completionStream {
	s := &completionStream{w: w, id: id, model: model, created: time.Now().Unix(), includeUsage: includeUsage}
	s.text = textEncoder(func(index int, text string) any {
		return s.chunk([]protocol.CompletionChoice{{Index: index, Text: text}}, nil)
	})
	return s
}

// textEncoder returns the encoder of sample's chunks; a sample it cannot
// use (never, for the chunk types of this package) leaves json.Marshal to
// do the work.
func textEncoder(sample func(index int, text string) any) *protocol.TextChunkEncoder {
	enc, err := protocol.NewTextChunkEncoder(sample)
	if err != nil {
		return nil
	}
	return enc
}

// writeText sends a chunk of text alone.
func (s *completionStream) writeText(index int, text string, slow func() any) error {
	if s.text == nil {
		return s.write(slow())
	}
	s.buf = s.text.Append(s.buf[:0], index, text)
	return s.writeHeld(s.buf)
}

func (s *completionStream) chunk(choices []protocol.CompletionChoice, usage *protocol.Usage) protocol.CompletionResponse {
	if choices == nil {
		choices = []protocol.CompletionChoice{}
	}
	return protocol.CompletionResponse{ID: s.id, Object: protocol.ObjectTextCompletion, Created: s.created, Model: s.model, Choices: choices, Usage: usage}
}

// write sends one event.
func (s *completionStream) write(v any) error {
	var err error
	if s.buf, err = protocol.AppendJSON(s.buf[:0], v); err != nil {
		return err
	}
	return s.writeData(s.buf)
}

// open sends the stream's status once; errClientGone once a write failed.
// After it an error is an event (see fail).
func (s *completionStream) open() error {
	if s.broken {
		return errClientGone
	}
	if s.sse == nil {
		s.sse = protocol.NewSSEWriter(s.w)
		s.w.WriteHeader(http.StatusOK)
	}
	s.written = true
	return nil
}

// writeData sends one event's data.
func (s *completionStream) writeData(data []byte) error {
	if err := s.writeHeld(data); err != nil {
		return err
	}
	s.sse.Flush()
	return nil
}

// writeHeld writes one event's data without flushing it.
func (s *completionStream) writeHeld(data []byte) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := s.sse.WriteEvent(data); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// flush sends the held deltas.
func (s *completionStream) flush() {
	if s.sse != nil && !s.broken {
		s.sse.Flush()
	}
}

func (s *completionStream) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	chunk := func() any {
		return s.chunk([]protocol.CompletionChoice{{Index: index, Text: text, Logprobs: logprobs}}, nil)
	}
	if logprobs == nil {
		return s.writeText(index, text, chunk)
	}
	return s.write(chunk())
}

func (s *completionStream) finish(index int, reason string) {
	_ = s.write(s.chunk([]protocol.CompletionChoice{{Index: index, FinishReason: &reason}}, nil))
}

func (s *completionStream) done(usage protocol.Usage) {
	if s.includeUsage {
		_ = s.write(s.chunk(nil, &usage))
	}
	if !s.broken && s.sse != nil {
		_ = s.sse.WriteDone()
	}
}

func (s *completionStream) fail(err *protocol.Error) {
	if !s.written {
		err.Write(s.w)
		return
	}
	// Text was sent: the status is gone, so the error is the last event.
	_ = s.write(protocol.ErrorBody{Error: err})
}

// completionWhole collects a completion and answers it as one JSON body.
type completionWhole struct {
	w         http.ResponseWriter
	id, model string
	choices   []protocol.CompletionChoice
}

// newCompletionWhole collects n choices; with logprobs, each carries the
// logprobs of all its tokens.
func newCompletionWhole(w http.ResponseWriter, id, model string, n int, logprobs bool) *completionWhole {
	c := &completionWhole{w: w, id: id, model: model, choices: make([]protocol.CompletionChoice, n)}
	for i := range c.choices {
		c.choices[i] = protocol.CompletionChoice{Index: i}
		if logprobs {
			c.choices[i].Logprobs = protocol.NewCompletionLogprobs(0)
		}
	}
	return c
}

func (c *completionWhole) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	ch := &c.choices[index]
	ch.Text += text
	if ch.Logprobs != nil {
		ch.Logprobs.Append(logprobs)
	}
	return nil
}

func (c *completionWhole) flush() {}

func (c *completionWhole) finish(index int, reason string) {
	c.choices[index].FinishReason = &reason
}

func (c *completionWhole) done(usage protocol.Usage) {
	protocol.WriteJSON(c.w, http.StatusOK, protocol.CompletionResponse{
		ID: c.id, Object: protocol.ObjectTextCompletion, Created: time.Now().Unix(),
		Model: c.model, Choices: c.choices, Usage: &usage,
	})
}

func (c *completionWhole) fail(err *protocol.Error) { err.Write(c.w) }

// chatSink writes a chat completion, streamed or whole.
func chatSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return newChatStream(w, id, model, req.IncludeUsage())
	}
	return newChatWhole(w, id, model, req.NOr(), req.Logprobs != nil)
}

// chatStream streams a chat completion as chat.completion.chunk events.
// Every delta names the role (MLC's stream model requires it; see
// protocol.ChatDelta), and logprobs go out in the chat shape.
type chatStream struct {
	*completionStream
	calls map[int]int // tool calls sent, by choice
}

func newChatStream(w http.ResponseWriter, id, model string, includeUsage bool) *chatStream {
	s := &chatStream{completionStream: newCompletionStream(w, id, model, includeUsage)}
	s.text = textEncoder(func(index int, text string) any {
		return s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: protocol.ChatDelta{Role: protocol.RoleAssistant, Content: &text}}}, nil)
	})
	return s
}

func (s *chatStream) chatChunk(choices []protocol.ChatChunkChoice, usage *protocol.Usage) protocol.ChatCompletionChunk {
	if choices == nil {
		choices = []protocol.ChatChunkChoice{}
	}
	return protocol.ChatCompletionChunk{ID: s.id, Object: protocol.ObjectChatCompletionChunk, Created: s.created, Model: s.model,
		SystemFingerprint: protocol.SystemFingerprint, Choices: choices, Usage: usage}
}

func (s *chatStream) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	chunk := func() any {
		d := protocol.ChatDelta{Role: protocol.RoleAssistant, Content: &text}
		return s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: d, Logprobs: chatLogprobs(logprobs)}}, nil)
	}
	if logprobs == nil {
		return s.writeText(index, text, chunk)
	}
	return s.write(chunk())
}

// call sends a tool call as OpenAI streams one: a delta that names it
// (its index among the choice's calls, id, type, name, no arguments yet),
// then its arguments in pieces.
func (s *chatStream) call(index int, name, arguments string) error {
	if s.calls == nil {
		s.calls = map[int]int{}
	}
	k := s.calls[index]
	s.calls[index]++
	first := protocol.ToolCallDelta{Index: k, ID: protocol.NewID("call_"), Type: "function", Function: &protocol.FunctionCallDelta{Name: name}}
	if err := s.writeToolCall(index, first); err != nil {
		return err
	}
	for _, piece := range argumentPieces(arguments) {
		if err := s.writeToolCall(index, protocol.ToolCallDelta{Index: k, Function: &protocol.FunctionCallDelta{Arguments: piece}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *chatStream) writeToolCall(index int, d protocol.ToolCallDelta) error {
	delta := protocol.ChatDelta{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCallDelta{d}}
	return s.write(s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: delta}}, nil))
}

func (s *chatStream) finish(index int, reason string) {
	d := protocol.ChatDelta{Role: protocol.RoleAssistant}
	_ = s.write(s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: d, FinishReason: &reason}}, nil))
}

func (s *chatStream) done(usage protocol.Usage) {
	if s.includeUsage {
		_ = s.write(s.chatChunk(nil, &usage))
	}
	if !s.broken && s.sse != nil {
		_ = s.sse.WriteDone()
	}
}

// chatWhole answers a chat completion as one JSON body.
type chatWhole struct {
	*completionWhole
	toolCalls [][]protocol.ToolCall // by choice
}

func newChatWhole(w http.ResponseWriter, id, model string, n int, logprobs bool) *chatWhole {
	return &chatWhole{completionWhole: newCompletionWhole(w, id, model, n, logprobs), toolCalls: make([][]protocol.ToolCall, n)}
}

func (c *chatWhole) call(index int, name, arguments string) error {
	c.toolCalls[index] = append(c.toolCalls[index], protocol.ToolCall{ID: protocol.NewID("call_"), Type: "function",
		Function: protocol.FunctionCall{Name: name, Arguments: arguments}})
	return nil
}

func (c *chatWhole) done(usage protocol.Usage) {
	choices := make([]protocol.ChatChoice, len(c.choices))
	for i, ch := range c.choices {
		choices[i] = protocol.ChatChoice{Index: i, Message: protocol.ChatMessage{Role: protocol.RoleAssistant, Content: ch.Text, ToolCalls: c.toolCalls[i]},
			FinishReason: ch.FinishReason, Logprobs: chatLogprobs(ch.Logprobs)}
	}
	protocol.WriteJSON(c.w, http.StatusOK, protocol.ChatCompletionResponse{
		ID: c.id, Object: protocol.ObjectChatCompletion, Created: time.Now().Unix(), Model: c.model,
		SystemFingerprint: protocol.SystemFingerprint, Choices: choices, Usage: &usage,
	})
}

// chatLogprobs is logprobs in the chat shape; nil (null) when the request
// did not ask for them.
func chatLogprobs(logprobs *protocol.CompletionLogprobs) *protocol.ChatLogprobs {
	if logprobs == nil {
		return nil
	}
	c := logprobs.Chat()
	return &c
}

// Defaults of the bounds on a client's own pace.
const (
	// DefaultBodyTimeout bounds how long a request body may take to
	// arrive: a 4 MiB body (max_body_size's default) in 20 s is 1.7
	// Mbit/s, slower than any client that means to be served, and a body
	// that never ends no longer holds its connection and handler.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultClientTimeout bounds how long a client may go without
	// accepting a byte of its answer. A client's network may stall for
	// seconds (a mobile hand-over); half a minute is past any of those,
	// while the engine's KV, its batch slot and the reservation it holds
	// for a client that stopped reading cost every other client.
	DefaultClientTimeout = 30 * time.Second
)

// Reasons the router lets a client go, as counted in
// caddy_mlc_clients_dropped_total.
const (
	dropSlowBody = "slow_body" // the body did not arrive within body_timeout
	dropStalled  = "stalled"   // the client accepted no byte for client_timeout
)

// stallWriter lets a client go that stops reading: each write (and
// flush) of the answer must be accepted within the timeout, else it fails
// as a client that left does, which cancels the engines' work for it and
// frees its KV. A client's pace within the timeout is its own affair.
type stallWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time
	stalled  bool // a write ran into the deadline
}

func newStallWriter(w http.ResponseWriter, timeout time.Duration) *stallWriter {
	return &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
}

// arm sets the deadline of the next write.
func (s *stallWriter) arm() {
	s.deadline = time.Now().Add(s.timeout)
	_ = s.rc.SetWriteDeadline(s.deadline)
}

// check records a write that failed at its deadline.
func (s *stallWriter) check(err error) error {
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(s.deadline)) {
		s.stalled = true
	}
	return err
}

func (s *stallWriter) Write(b []byte) (int, error) {
	s.arm()
	n, err := s.ResponseWriter.Write(b)
	return n, s.check(err)
}

func (s *stallWriter) Flush() {
	s.arm()
	_ = s.check(s.rc.Flush())
}

// Unwrap lets http.ResponseController reach the connection.
func (s *stallWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// end lifts the deadline, which would otherwise stay on a kept-alive
// connection for its next request.
func (s *stallWriter) end() { _ = s.rc.SetWriteDeadline(time.Time{}) }
