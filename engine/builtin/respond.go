package builtin

import (
	"context"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Answering a completion from the events of its request: whole, once it
// is done, or as server-sent events while it runs.

// collect answers a whole completion once it is done.
func (s *server) collect(w http.ResponseWriter, ctx context.Context, req *protocol.CompletionRequest, cr *request) {
	resp := s.response(req, cr)
	logprobs := make([][]tokenLogprob, len(cr.seqs))
	for i := range cr.seqs {
		resp.Choices = append(resp.Choices, protocol.CompletionChoice{Index: i})
	}
	s.follow(ctx, cr, func(ev event) bool {
		if ev.done {
			if ev.aborted {
				unavailable(errStopped).Write(w)
				return true
			}
			resp.Usage = ev.usage
			for i := range resp.Choices {
				resp.Choices[i].Logprobs = choiceLogprobs(cr, logprobs[i])
			}
			protocol.WriteJSON(w, http.StatusOK, resp)
			return true
		}
		resp.Choices[ev.choice].Text += ev.text
		logprobs[ev.choice] = append(logprobs[ev.choice], ev.logprobs...)
		if ev.finish != "" {
			resp.Choices[ev.choice].FinishReason = new(ev.finish)
		}
		return false
	})
}

// stream answers a completion as server-sent events.
func (s *server) stream(w http.ResponseWriter, ctx context.Context, req *protocol.CompletionRequest, cr *request) {
	sse := protocol.NewSSEWriter(w)
	s.follow(ctx, cr, func(ev event) bool {
		if ev.done {
			s.endStream(sse, req, cr, ev)
			return true
		}
		chunk := s.response(req, cr)
		choice := protocol.CompletionChoice{Index: ev.choice, Text: ev.text, Logprobs: choiceLogprobs(cr, ev.logprobs)}
		if ev.finish != "" {
			choice.FinishReason = new(ev.finish)
		}
		chunk.Choices = []protocol.CompletionChoice{choice}
		if sse.WriteJSON(chunk) != nil {
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
func (s *server) endStream(sse *protocol.SSEWriter, req *protocol.CompletionRequest, cr *request, ev event) {
	if ev.aborted {
		s.e.logf("request %s: stream ended by shutdown", cr.id)
	} else if req.IncludeUsage() {
		chunk := s.response(req, cr)
		chunk.Choices = []protocol.CompletionChoice{}
		chunk.Usage = ev.usage
		_ = sse.WriteJSON(chunk)
	}
	_ = sse.WriteDone()
}

// response returns an empty completion response for cr.
func (s *server) response(req *protocol.CompletionRequest, cr *request) protocol.CompletionResponse {
	m := req.Model
	if m == "" {
		m = s.e.opts.Model
	}
	return protocol.CompletionResponse{ID: "cmpl-" + cr.id, Object: protocol.ObjectTextCompletion, Created: time.Now().Unix(), Model: m, Choices: []protocol.CompletionChoice{}}
}

// choiceLogprobs is the logprobs of a choice (or of a chunk of it): the
// entries in the completion shape when the request asks for logprobs,
// else nil (null on the wire).
func choiceLogprobs(cr *request, entries []tokenLogprob) *protocol.CompletionLogprobs {
	if !cr.params.logprobs {
		return nil
	}
	return completionLogprobs(entries)
}
