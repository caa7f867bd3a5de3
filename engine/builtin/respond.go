package builtin

import (
	"context"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Answering a request from the events of its generation: whole, once it
// is done, or as server-sent events while it runs, in the shape of the
// API it came by (an answer: completion.go's or chatanswer.go's).

// answer shapes a request's answer.
type answer interface {
	// whole is the answer once every choice is done.
	whole(choices []choiceText, usage *protocol.Usage) any
	// chunk is the stream event that carries ev.
	chunk(ev event) any
	// usageChunk is the stream's last event, with usage and no choices.
	usageChunk(usage *protocol.Usage) any
}

// choiceText is one choice of a whole answer.
type choiceText struct {
	text     string
	finish   *string
	logprobs []tokenLogprob
}

// collect answers a whole request once it is done.
func (s *server) collect(w http.ResponseWriter, ctx context.Context, cr *request, a answer) {
	choices := make([]choiceText, len(cr.seqs))
	s.follow(ctx, cr, func(ev event) bool {
		if ev.done {
			if ev.aborted {
				unavailable(errStopped).Write(w)
				return true
			}
			protocol.WriteJSON(w, http.StatusOK, a.whole(choices, ev.usage))
			return true
		}
		c := &choices[ev.choice]
		c.text += ev.text
		c.logprobs = append(c.logprobs, ev.logprobs...)
		if ev.finish != "" {
			c.finish = new(ev.finish)
		}
		return false
	})
}

// stream answers a request as server-sent events; includeUsage asks for
// a last chunk with usage.
func (s *server) stream(w http.ResponseWriter, ctx context.Context, cr *request, a answer, includeUsage bool) {
	sse := protocol.NewSSEWriter(w)
	s.follow(ctx, cr, func(ev event) bool {
		if ev.done {
			s.endStream(sse, cr, ev, a, includeUsage)
			return true
		}
		if sse.WriteJSON(a.chunk(ev)) != nil {
			s.abort(cr)
			return true
		}
		return false
	})
}

// follow hands the request's events to handle, in order, until handle
// reports it has answered, or the client goes away: the request is then
// aborted and its pages freed.
func (s *server) follow(ctx context.Context, cr *request, handle func(event) (answered bool)) {
	for {
		evs, err := cr.events.wait(ctx)
		if err != nil {
			s.abort(cr)
			return
		}
		for _, ev := range evs {
			if handle(ev) {
				return
			}
		}
	}
}

// endStream writes the usage chunk, when asked for, and the end marker.
func (s *server) endStream(sse *protocol.SSEWriter, cr *request, ev event, a answer, includeUsage bool) {
	if ev.aborted {
		s.e.logf("request %s: stream ended by shutdown", cr.id)
	} else if includeUsage {
		_ = sse.WriteJSON(a.usageChunk(ev.usage))
	}
	_ = sse.WriteDone()
}

// modelName is the model an answer names: the request's, else the
// engine's.
func (s *server) modelName(requested string) string {
	if requested == "" {
		return s.e.opts.Model
	}
	return requested
}
