package router

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The completions API (/v1/completions): its prepare step, and the sinks
// that write its answer, streamed or whole. The chat API (chat.go) builds
// on both.

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

	mu      sync.Mutex
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

// writeText sends a chunk of text alone; the caller holds mu.
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

// write sends one event; the caller holds mu.
func (s *completionStream) write(v any) error {
	var err error
	if s.buf, err = protocol.AppendJSON(s.buf[:0], v); err != nil {
		return err
	}
	return s.writeData(s.buf)
}

// writeData sends one event's data; the caller holds mu.
func (s *completionStream) writeData(data []byte) error {
	if err := s.writeHeld(data); err != nil {
		return err
	}
	s.sse.Flush()
	return nil
}

// writeHeld writes one event's data without flushing it; the caller
// holds mu.
func (s *completionStream) writeHeld(data []byte) error {
	if s.broken {
		return errClientGone
	}
	if s.sse == nil {
		s.sse = protocol.NewSSEWriter(s.w)
		s.w.WriteHeader(http.StatusOK)
	}
	s.written = true
	if err := s.sse.WriteEvent(data); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// flush sends the held deltas.
func (s *completionStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sse != nil && !s.broken {
		s.sse.Flush()
	}
}

func (s *completionStream) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	chunk := func() any {
		return s.chunk([]protocol.CompletionChoice{{Index: index, Text: text, Logprobs: logprobs}}, nil)
	}
	if logprobs == nil {
		return s.writeText(index, text, chunk)
	}
	return s.write(chunk())
}

func (s *completionStream) finish(index int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.write(s.chunk([]protocol.CompletionChoice{{Index: index, FinishReason: &reason}}, nil))
}

func (s *completionStream) done(usage protocol.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.includeUsage {
		_ = s.write(s.chunk(nil, &usage))
	}
	if !s.broken && s.sse != nil {
		_ = s.sse.WriteDone()
	}
}

func (s *completionStream) fail(err *protocol.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	mu        sync.Mutex
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
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := &c.choices[index]
	ch.Text += text
	if ch.Logprobs != nil {
		ch.Logprobs.Append(logprobs)
	}
	return nil
}

func (c *completionWhole) flush() {}

func (c *completionWhole) finish(index int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.choices[index].FinishReason = &reason
}

func (c *completionWhole) done(usage protocol.Usage) {
	protocol.WriteJSON(c.w, http.StatusOK, protocol.CompletionResponse{
		ID: c.id, Object: protocol.ObjectTextCompletion, Created: time.Now().Unix(),
		Model: c.model, Choices: c.choices, Usage: &usage,
	})
}

func (c *completionWhole) fail(err *protocol.Error) { err.Write(c.w) }
