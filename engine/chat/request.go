package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Serving a chat completion as a completion: the conversation rendered
// with the model's template, tokenized, and generated as a completion
// with the template's stop strings. The router does it in front of the
// engines, the built-in engine behind /v1/chat/completions; both call
// Completion, so that a chat answer is the same text from either.

// ForModel returns the chat template of a model as the router and the
// built-in engine name models: Tiny for "tiny", else the model
// directory's (see Load).
func ForModel(model string) (Template, error) {
	if model == tokenizer.TinyModel {
		return Tiny(), nil
	}
	return Load(model)
}

// Encoder tokenizes rendered conversations.
type Encoder interface {
	Encode(text string) []int
}

// Completion returns the completion request that answers creq with the
// template t: the conversation rendered (generation prompt on, creq's
// chat_template_kwargs as variables, its tools unless tool_choice is
// "none"), tokenized with enc after t's prefix token ids, and creq's stop
// strings followed by t's. Its other fields are creq's (see
// protocol.ChatCompletionRequest.Completion); debug_config is left out.
// A conversation t cannot express is a 400 about messages; a template
// that fails otherwise, a 500.
func Completion(t Template, enc Encoder, creq *protocol.ChatCompletionRequest) (*protocol.CompletionRequest, *protocol.Error) {
	msgs := make([]Message, len(creq.Messages))
	for i, raw := range creq.Messages {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil || msgs[i].Role == "" {
			return nil, protocol.InvalidRequest("messages", "messages[%d]: want an object with a role and a content", i)
		}
	}
	opts := DefaultOptions()
	opts.Vars = creq.ChatTemplateKwargs
	if !bytes.Equal(bytes.TrimSpace(creq.ToolChoice), []byte(`"none"`)) {
		opts.Tools = creq.Tools
	}
	text, err := t.Render(msgs, opts)
	if errors.Is(err, ErrUnsupported) {
		return nil, protocol.InvalidRequest("messages", "%v", err)
	}
	if err != nil {
		return nil, protocol.Errorf(http.StatusInternalServerError, protocol.ErrTypeServer, "rendering the chat template: %v", err)
	}
	var prompt []int
	if tt, ok := t.(TokenIDTemplate); ok {
		prompt = append(prompt, tt.PrefixTokenIDs()...)
	}
	prompt = append(prompt, enc.Encode(text)...)
	if len(prompt) == 0 {
		return nil, protocol.InvalidRequest("messages", "the conversation renders to no tokens")
	}
	req := creq.Completion(prompt)
	req.Stop = append(append(protocol.StopList(nil), creq.Stop...), t.StopStrings()...)
	return req, nil
}
