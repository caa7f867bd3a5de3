package builtin

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// completionAnswer answers a completion: text_completion objects, the
// logprobs in the completion shape.
type completionAnswer struct {
	s   *server
	req *protocol.CompletionRequest
	cr  *request
}

func (a completionAnswer) whole(choices []choiceText, usage *protocol.Usage) any {
	resp := a.s.response(a.req, a.cr)
	for i, c := range choices {
		resp.Choices = append(resp.Choices, protocol.CompletionChoice{Index: i, Text: c.text, FinishReason: c.finish,
			Logprobs: choiceLogprobs(a.cr, c.logprobs)})
	}
	resp.Usage = usage
	return resp
}

func (a completionAnswer) chunk(ev event) any {
	chunk := a.s.response(a.req, a.cr)
	choice := protocol.CompletionChoice{Index: ev.choice, Text: ev.text, Logprobs: choiceLogprobs(a.cr, ev.logprobs)}
	if ev.finish != "" {
		choice.FinishReason = new(ev.finish)
	}
	chunk.Choices = []protocol.CompletionChoice{choice}
	if ev.first {
		return protocol.MatchedChunk{CompletionResponse: chunk, PrefixMatchedLength: &ev.matched}
	}
	return chunk
}

func (a completionAnswer) usageChunk(usage *protocol.Usage) any {
	chunk := a.s.response(a.req, a.cr)
	chunk.Usage = usage
	return chunk
}

// response returns an empty completion response for cr.
func (s *server) response(req *protocol.CompletionRequest, cr *request) protocol.CompletionResponse {
	return protocol.CompletionResponse{ID: "cmpl-" + cr.id, Object: protocol.ObjectTextCompletion, Created: time.Now().Unix(),
		Model: s.modelName(req.Model), Choices: []protocol.CompletionChoice{}}
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
