package router

import (
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// eventStream writes a stream of named events (event: and data: lines),
// as Anthropic's Messages API and OpenAI's Responses API stream their
// answers. Like completionStream, it writes the headers with the first
// event, so that a request that fails before any event still gets a
// plain HTTP error. The caller serialises its calls.
type eventStream struct {
	w      http.ResponseWriter
	sse    *protocol.SSEWriter
	buf    []byte
	broken bool // the client stopped reading
}

// started reports whether the answer's headers and first event went out.
func (s *eventStream) started() bool { return s.sse != nil }

// event writes one event of type name with v's JSON as its data, without
// flushing it.
func (s *eventStream) event(name string, v any) error {
	if s.broken {
		return errClientGone
	}
	if s.sse == nil {
		s.sse = protocol.NewSSEWriter(s.w)
		s.w.WriteHeader(http.StatusOK)
	}
	var err error
	if s.buf, err = protocol.AppendJSON(s.buf[:0], v); err != nil {
		return err
	}
	if err := s.sse.WriteNamedEvent(name, s.buf); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// flush sends the events written.
func (s *eventStream) flush() {
	if s.sse != nil && !s.broken {
		s.sse.Flush()
	}
}
