package builtin

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// chatAnswer answers a chat completion as MLC's entrypoint does:
// chat.completion objects whole, chat.completion.chunk events streamed,
// each delta with the assistant's role and its text (empty with a finish
// reason), logprobs in the chat shape.
type chatAnswer struct {
	s       *server
	model   string
	cr      *request
	created int64
}

// chatAnswerOf answers a chat for model.
func (s *server) chatAnswerOf(model string) answerFunc {
	return func(cr *request) answer {
		return chatAnswer{s: s, model: s.modelName(model), cr: cr, created: time.Now().Unix()}
	}
}

func (a chatAnswer) whole(choices []choiceText, usage *protocol.Usage) any {
	out := make([]protocol.ChatChoice, len(choices))
	for i, c := range choices {
		out[i] = protocol.ChatChoice{Index: i, Message: protocol.ChatMessage{Role: protocol.RoleAssistant, Content: c.text},
			FinishReason: c.finish, Logprobs: a.logprobs(c.logprobs)}
	}
	return protocol.ChatCompletionResponse{ID: a.id(), Object: protocol.ObjectChatCompletion, Created: a.created, Model: a.model,
		Choices: out, Usage: usage}
}

func (a chatAnswer) chunk(ev event) any {
	text := ev.text
	c := protocol.ChatChunkChoice{Index: ev.choice, Delta: protocol.ChatDelta{Role: protocol.RoleAssistant, Content: &text},
		Logprobs: a.logprobs(ev.logprobs)}
	if ev.finish != "" {
		c.FinishReason = new(ev.finish)
	}
	return a.chunkOf([]protocol.ChatChunkChoice{c}, nil)
}

func (a chatAnswer) usageChunk(usage *protocol.Usage) any {
	return a.chunkOf([]protocol.ChatChunkChoice{}, usage)
}

func (a chatAnswer) chunkOf(choices []protocol.ChatChunkChoice, usage *protocol.Usage) protocol.ChatCompletionChunk {
	return protocol.ChatCompletionChunk{ID: a.id(), Object: protocol.ObjectChatCompletionChunk, Created: a.created, Model: a.model,
		Choices: choices, Usage: usage}
}

func (a chatAnswer) id() string { return "chatcmpl-" + a.cr.id }

// logprobs is the chat shape of entries when the request asks for
// logprobs, else nil (null on the wire).
func (a chatAnswer) logprobs(entries []tokenLogprob) *protocol.ChatLogprobs {
	if !a.cr.params.logprobs {
		return nil
	}
	c := completionLogprobs(entries).Chat()
	return &c
}
