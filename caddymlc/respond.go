package caddymlc

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// sinkMaker makes the sink that writes one API's answer to a request.
type sinkMaker func(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink

// completionSink writes a completion, streamed or whole.
func completionSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return newCompletionStream(w, id, model, req.IncludeUsage())
	}
	return newCompletionWhole(w, id, model, req.NOr())
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
}

func newCompletionStream(w http.ResponseWriter, id, model string, includeUsage bool) *completionStream {
	return &completionStream{w: w, id: id, model: model, created: time.Now().Unix(), includeUsage: includeUsage}
}

func (s *completionStream) chunk(choices []protocol.CompletionChoice, usage *protocol.Usage) protocol.CompletionResponse {
	if choices == nil {
		choices = []protocol.CompletionChoice{}
	}
	return protocol.CompletionResponse{ID: s.id, Object: protocol.ObjectTextCompletion, Created: s.created, Model: s.model, Choices: choices, Usage: usage}
}

// write sends one event; the caller holds mu.
func (s *completionStream) write(v any) error {
	if s.broken {
		return errClientGone
	}
	if s.sse == nil {
		s.sse = protocol.NewSSEWriter(s.w)
		s.w.WriteHeader(http.StatusOK)
	}
	s.written = true
	if err := s.sse.WriteJSON(v); err != nil {
		s.broken = true
		return err
	}
	return nil
}

func (s *completionStream) delta(index int, text string, logprobs *protocol.CompletionLogprobs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(s.chunk([]protocol.CompletionChoice{{Index: index, Text: text, Logprobs: logprobs}}, nil))
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

func newCompletionWhole(w http.ResponseWriter, id, model string, n int) *completionWhole {
	c := &completionWhole{w: w, id: id, model: model, choices: make([]protocol.CompletionChoice, n)}
	for i := range c.choices {
		c.choices[i] = protocol.CompletionChoice{Index: i}
	}
	return c
}

func (c *completionWhole) delta(index int, text string, _ *protocol.CompletionLogprobs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.choices[index].Text += text
	return nil
}

func (c *completionWhole) finish(index int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.choices[index].FinishReason = &reason
}

func (c *completionWhole) done(usage protocol.Usage) {
	writeJSON(c.w, http.StatusOK, protocol.CompletionResponse{
		ID: c.id, Object: protocol.ObjectTextCompletion, Created: time.Now().Unix(),
		Model: c.model, Choices: c.choices, Usage: &usage,
	})
}

func (c *completionWhole) fail(err *protocol.Error) { err.Write(c.w) }

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "encoding the answer: %v", err).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
