package router

import (
	"bytes"
	"encoding/json"
	"errors"
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

// serveChat renders the conversation with the model's template, tokenizes
// it, and serves it as a completion whose text is the assistant's answer.
func (r *Router) serveChat(w http.ResponseWriter, hreq *http.Request) {
	r.serve(w, hreq, "chatcmpl-", r.prepareChat, chatSink)
}

// prepareChat decodes a chat request and returns the completion request
// that answers it, with the rendered conversation's ids and the template's
// stop strings.
func (r *Router) prepareChat(hreq *http.Request) (*protocol.CompletionRequest, []int, *protocol.Error) {
	creq, release, apiErr := r.decodeChat(hreq)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer release()
	prompt, stops, apiErr := r.renderChat(creq)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	req := creq.Completion(prompt)
	req.Stop = append(append(protocol.StopList(nil), creq.Stop...), stops...)
	return req, prompt, nil
}

// chatSink writes a chat completion, streamed or whole.
func chatSink(w http.ResponseWriter, id, model string, req *protocol.CompletionRequest) sink {
	if req.Stream {
		return newChatStream(w, id, model, req.IncludeUsage())
	}
	return newChatWhole(w, id, model, req.NOr(), req.Logprobs != nil)
}

// decodeChat reads, decodes and validates a chat request; the model is
// checked before the other fields, as prepareCompletion does.
// release gives back the large slot the request may hold (see readBody).
func (r *Router) decodeChat(hreq *http.Request) (_ *protocol.ChatCompletionRequest, release func(), _ *protocol.Error) {
	b, release, e := r.readBody(hreq)
	if e != nil {
		return nil, nil, e
	}
	var creq protocol.ChatCompletionRequest
	e = protocol.DecodeJSON(b, &creq)
	if e == nil {
		e = r.checkModel(creq.Model)
	}
	if e == nil {
		e = creq.Validate()
	}
	if e == nil {
		e = r.checkTopLogprobs(creq.TopLogprobs)
	}
	if e != nil {
		release()
		return nil, nil, e
	}
	return &creq, release, nil
}

// checkTopLogprobs refuses a top_logprobs that the engines cannot serve.
// The router asks engines for a chat's top_logprobs as the logprobs of a
// completion request. The built-in engine serves them up to the chat
// bound (20); MLC-LLM's engines validate a completion's logprobs against
// its own bound (5; engine.Traits.MaxLogprobs), so with them more is a
// 400 here, naming the chat field, rather than fewer alternatives than
// asked for or an engine's error about a field the client did not send.
func (r *Router) checkTopLogprobs(k *int) *protocol.Error {
	if k == nil || *k <= protocol.MaxCompletionLogprobs {
		return nil
	}
	bound := r.EngineKind.Driver().Traits().MaxLogprobs
	if bound == 0 || *k <= bound {
		return nil
	}
	return protocol.InvalidRequest("top_logprobs", "top_logprobs must be at most %d with %s engines (they serve a chat's logprobs through completion requests, which they bound at %d), got %d",
		bound, r.EngineKind, bound, *k).WithCode(protocol.CodeIntegerAboveMax)
}

// renderChat returns the prompt ids of the conversation and the stop
// strings its template implies.
func (r *Router) renderChat(creq *protocol.ChatCompletionRequest) ([]int, []string, *protocol.Error) {
	if r.tok == nil {
		return nil, nil, r.noTokenizer("messages", "a chat completion")
	}
	if r.chatTmpl == nil {
		return nil, nil, protocol.InvalidRequest("messages", "model %s has no chat template (%v); use /v1/completions", r.Model, r.chatErr)
	}
	msgs := make([]chat.Message, len(creq.Messages))
	for i, raw := range creq.Messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil || msgs[i].Role == "" {
			return nil, nil, protocol.InvalidRequest("messages", "messages[%d]: want an object with a role and a content", i)
		}
	}
	opts := chat.DefaultOptions()
	opts.Vars = creq.ChatTemplateKwargs
	if !bytes.Equal(bytes.TrimSpace(creq.ToolChoice), []byte(`"none"`)) {
		opts.Tools = creq.Tools
	}
	text, err := r.chatTmpl.Render(msgs, opts)
	if errors.Is(err, chat.ErrUnsupported) {
		return nil, nil, protocol.InvalidRequest("messages", "%v", err)
	}
	if err != nil {
		return nil, nil, protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "rendering the chat template: %v", err)
	}
	var prompt []int
	if t, ok := r.chatTmpl.(chat.TokenIDTemplate); ok {
		prompt = append(prompt, t.PrefixTokenIDs()...)
	}
	ids, apiErr := r.encode(text)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	prompt = append(prompt, ids...)
	if len(prompt) == 0 {
		return nil, nil, protocol.InvalidRequest("messages", "the conversation renders to no tokens")
	}
	return prompt, r.chatTmpl.StopStrings(), nil
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
