package router

import (
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// loadChatTemplate returns the model's chat template: the built-in one for
// tiny, else the model directory's (mlc-chat-config.json's conv_template,
// or tokenizer_config.json's Jinja chat_template).
func loadChatTemplate(model string) (chat.Template, error) {
	if model == tokenizer.TinyModel {
		return chat.Tiny(), nil
	}
	return chat.Load(model)
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	chunk := func() any {
		d := protocol.ChatDelta{Role: protocol.RoleAssistant, Content: &text}
		return s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: d, Logprobs: chatLogprobs(logprobs)}}, nil)
	}
	if logprobs == nil {
		return s.writeText(index, text, chunk)
	}
	return s.write(chunk())
}

func (s *chatStream) finish(index int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := protocol.ChatDelta{Role: protocol.RoleAssistant}
	_ = s.write(s.chatChunk([]protocol.ChatChunkChoice{{Index: index, Delta: d, FinishReason: &reason}}, nil))
}

func (s *chatStream) done(usage protocol.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.includeUsage {
		_ = s.write(s.chatChunk(nil, &usage))
	}
	if !s.broken && s.sse != nil {
		_ = s.sse.WriteDone()
	}
}

// chatWhole answers a chat completion as one JSON body.
type chatWhole struct{ *completionWhole }

func newChatWhole(w http.ResponseWriter, id, model string, n int, logprobs bool) *chatWhole {
	return &chatWhole{newCompletionWhole(w, id, model, n, logprobs)}
}

func (c *chatWhole) done(usage protocol.Usage) {
	choices := make([]protocol.ChatChoice, len(c.choices))
	for i, ch := range c.choices {
		choices[i] = protocol.ChatChoice{Index: i, Message: protocol.ChatMessage{Role: protocol.RoleAssistant, Content: ch.Text},
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
