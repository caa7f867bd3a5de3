package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// stubEngine is an engine that keeps streams open without sending: what
// an idle stream costs a router. It speaks as much of MLC's API as a
// router needs (GET /v1/models, POST /v1/completions, the load query) and
// answers a streamed completion of holdPrompt with one chunk, then holds
// the stream until release; any other completion at once. (A router may
// serve any request as a streamed engine call, so the prompt, which it
// passes on, is what marks a stream to hold.)
type stubEngine struct {
	srv      *http.Server
	url      string
	held     atomic.Int64
	changed  chan struct{} // poked whenever held changes
	released chan struct{}
	release  func()
	served   sync.WaitGroup
}

// stubWord is the text of every chunk: a word of the tiny vocabulary, so
// a router that tokenizes what it relayed finds it canonical.
const stubWord = " the"

// holdPrompt is the prompt of the streams the stub holds.
var holdPrompt = []int{5, 6, 7, 8}

// holdBody is the request of an idle stream.
var holdBody = []byte(`{"model":"tiny","prompt":[5,6,7,8],"max_tokens":4,"temperature":0,"stream":true}`)

// startStub listens on a free port of 127.0.0.1 and serves.
func startStub() (*stubEngine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &stubEngine{url: "http://" + ln.Addr().String(), changed: make(chan struct{}, 1), released: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.released) })
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, protocol.NewModelList(0, "stub", "tiny"))
	})
	mux.HandleFunc("POST /v1/completions", s.completion)
	// No write timeout: holding a response open is the point.
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	s.served.Go(func() {
		defer goroutine.Recover(logger, "stub engine", nil)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Sugar().Errorf("stub engine: %v", err)
		}
	})
	return s, nil
}

// completion answers one completion (see stubEngine).
func (s *stubEngine) completion(w http.ResponseWriter, r *http.Request) {
	var req protocol.CompletionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		protocol.InvalidRequest("", "invalid JSON body: %v", err).Write(w)
		return
	}
	resp := protocol.CompletionResponse{ID: "cmpl-stub", Object: "text_completion", Model: "tiny"}
	usage := &protocol.Usage{PromptTokens: req.Prompt.Len(), CompletionTokens: 1, TotalTokens: req.Prompt.Len() + 1}
	if !req.Stream {
		// The load query and every non-streamed request.
		resp.Choices = []protocol.CompletionChoice{{Text: stubWord, FinishReason: new(protocol.FinishLength)}}
		resp.Usage = usage
		writeJSON(w, resp)
		return
	}
	sse := protocol.NewSSEWriter(w)
	resp.Choices = []protocol.CompletionChoice{{Text: stubWord}}
	if sse.WriteJSON(resp) != nil {
		return
	}
	if slices.Equal(req.Prompt.IDs, holdPrompt) {
		s.add(1)
		defer s.add(-1)
		select {
		case <-s.released:
		case <-r.Context().Done():
			return
		}
	}
	resp.Choices = []protocol.CompletionChoice{{FinishReason: new(protocol.FinishLength)}}
	if sse.WriteJSON(resp) != nil {
		return
	}
	if req.IncludeUsage() {
		resp.Choices, resp.Usage = []protocol.CompletionChoice{}, usage
		if sse.WriteJSON(resp) != nil {
			return
		}
	}
	_ = sse.WriteDone()
}

func (s *stubEngine) add(d int64) {
	s.held.Add(d)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// waitHeld waits until the stub holds exactly n streams.
func (s *stubEngine) waitHeld(ctx context.Context, n int64) error {
	for s.held.Load() != n {
		select {
		case <-s.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// close releases every stream and stops the server.
func (s *stubEngine) close() {
	s.release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close()
	}
	s.served.Wait()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
