package router

import (
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/watchdog"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Streams that wait say so: a streamed answer that has had nothing to
// send for the keep-alive interval (its request waiting in the router's
// queue for its turn at the engines, queued on an engine, a
// long prompt being prefilled, a stream being resumed elsewhere, a tool
// call the parser holds until it is whole) sends
// what its API has for it, which no client takes for content: an SSE
// comment line for completions, chat and responses, Anthropic's ping
// event for messages. A proxy's idle timeout (commonly 60 s) then never
// cuts a request an engine is working on.

// DefaultKeepAlive is the keep-alive interval of a waiting stream.
const DefaultKeepAlive = 10 * time.Second

// keepAliveComment is the SSE comment a waiting stream sends.
const keepAliveComment = "keep-alive"

// keepAliver is a streaming sink that can tell its client it waits.
type keepAliver interface {
	// keepAlive sends the stream's keep-alive, opening the stream (its
	// headers and the events that begin its API's answer) if need be.
	keepAlive() error
	// frames counts what the stream wrote so far (events, comments): the
	// readers in front of it (tool calls, reasoning) may hold text back,
	// and text held is silence to the client.
	frames() int64
}

// keepAliverOf is the streaming sink under s's readers of calls and
// reasoning; ok false when s does not stream.
func keepAliverOf(s sink) (keepAliver, bool) {
	for {
		switch t := s.(type) {
		case *toolCallSink:
			s = t.out
		case *thinkingSink:
			s = t.out
		case keepAliver:
			return t, true
		default:
			return nil, false
		}
	}
}

// keepAlive sends o's keep-alive every interval in which nothing was
// written to the client (text a reader holds back is nothing), until stop
// is called (before the request's answer ends; a check under way then
// writes nothing once the answer ended).
func (o *outcomeSink) keepAlive(every time.Duration) (stop func()) {
	ka, ok := keepAliverOf(o.sink)
	if !ok || every <= 0 {
		return func() {}
	}
	o.mu.Lock()
	o.ka, o.active = ka, time.Now()
	o.mu.Unlock()
	return watchdog.Start(every, func() time.Duration { return o.keepAliveDue(every) }).Stop
}

// noteWritten marks the stream active if its sink wrote since it last
// looked. The caller holds o.mu.
func (o *outcomeSink) noteWritten() {
	if o.ka == nil {
		return
	}
	if n := o.ka.frames(); n != o.written {
		o.written, o.active = n, time.Now()
	}
}

// keepAliveDue sends the keep-alive if nothing was written for every,
// and returns when it is due next.
func (o *outcomeSink) keepAliveDue(every time.Duration) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if idle := time.Since(o.active); idle < every {
		return every - idle
	}
	if o.ended {
		return 0
	}
	_ = o.ka.keepAlive() // a client gone shows in the next delta
	o.written, o.active, o.kept = o.ka.frames(), time.Now(), true
	return every
}

// refuseWaited answers a request the gate refused after it waited (a
// queue timeout, a client gone): as refuse does, unless a keep-alive
// opened its stream meanwhile, when the status is gone and the error is
// the stream's last event, in its API's shape.
func (r *Router) refuseWaited(w http.ResponseWriter, hreq *http.Request, a api, rec *outcomeSink, apiErr *protocol.Error) {
	rec.mu.Lock()
	kept := rec.kept
	rec.mu.Unlock()
	if !kept {
		r.refuse(w, hreq, a, apiErr)
		return
	}
	r.failAnswer(hreq, a, rec, apiErr)
}

// keepAlive sends an SSE comment (completions, chat completions).
func (s *completionStream) keepAlive() error {
	if err := s.open(); err != nil {
		return err
	}
	return s.comment()
}

func (s *completionStream) frames() int64 {
	if s.sse == nil {
		return 0
	}
	return s.sse.Frames()
}

func (s *messagesStream) frames() int64 { return s.out.frames() }

func (s *responsesStream) frames() int64 { return s.out.frames() }

// frames counts the events and comments the stream wrote.
func (s *eventStream) frames() int64 {
	if s.sse == nil {
		return 0
	}
	return s.sse.Frames()
}

func (s *completionStream) comment() error {
	if err := s.sse.WriteComment(keepAliveComment); err != nil {
		s.broken = true
		return err
	}
	s.sse.Flush()
	return nil
}

// keepAlive sends Anthropic's ping, after message_start.
func (s *messagesStream) keepAlive() error {
	if !s.out.started() {
		if err := s.begin(); err != nil {
			return err
		}
	}
	if err := s.out.event(protocol.EventPing, protocol.MessagesEvent{Type: protocol.EventPing}); err != nil {
		return err
	}
	s.out.flush()
	return nil
}

// keepAlive sends an SSE comment, after the events that open the
// response (response.created, response.in_progress).
func (s *responsesStream) keepAlive() error {
	if !s.out.started() {
		if err := s.begin(); err != nil {
			return err
		}
	}
	return s.out.comment()
}

// comment sends an SSE comment line.
func (s *eventStream) comment() error {
	if s.broken {
		return errClientGone
	}
	if err := s.sse.WriteComment(keepAliveComment); err != nil {
		s.broken = true
		return err
	}
	s.sse.Flush()
	return nil
}
