package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Anthropic's Messages API (POST /v1/messages), served as a chat
// completion: the request becomes the chat request of the same
// conversation (Chat), so that its text is the chat completion's.
// What a chat completion cannot carry is refused with a 400 that names
// the parameter: tools, images and documents, extended thinking, top_k,
// and an assistant turn last (a prefill, which a chat template cannot
// continue).

// MessagesRequest is the body of POST /v1/messages.
type MessagesRequest struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	System        json.RawMessage   `json:"system,omitempty"`
	MaxTokens     *int              `json:"max_tokens"`
	StopSequences []string          `json:"stop_sequences,omitempty"`
	Temperature   *float64          `json:"temperature,omitempty"`
	TopP          *float64          `json:"top_p,omitempty"`
	TopK          *int              `json:"top_k,omitempty"`
	Stream        bool              `json:"stream,omitempty"`
	Metadata      *MessagesMetadata `json:"metadata,omitempty"`
	Tools         []json.RawMessage `json:"tools,omitempty"`
	ToolChoice    json.RawMessage   `json:"tool_choice,omitempty"`
	Thinking      json.RawMessage   `json:"thinking,omitempty"`
}

// MessagesMetadata is a request's metadata; user_id becomes the chat
// request's user.
type MessagesMetadata struct {
	UserID *string `json:"user_id,omitempty"`
}

// messageTurn is one element of messages, its content a string or an
// array of blocks.
type messageTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messageBlock is a content block; only text blocks are served.
type messageBlock struct {
	Type string          `json:"type"`
	Text json.RawMessage `json:"text"`
}

// Chat checks the request and returns the chat completion request of the
// same conversation: the system prompt as a system message, each turn a
// message, a user turn's text blocks as text parts (which a chat template
// renders as it renders that turn's text) and another turn's joined
// without a separator, as templates join parts.
func (r *MessagesRequest) Chat() (*ChatCompletionRequest, *Error) {
	if e := r.validate(); e != nil {
		return nil, e
	}
	var msgs []json.RawMessage
	add := func(role string, content any) { msgs = append(msgs, chatMessage(role, content)) }
	if system, e := anthropicText("system", r.System); e != nil {
		return nil, e
	} else if system.joined() != "" {
		add(RoleSystem, system.joined())
	}
	for i, raw := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		var t messageTurn
		if json.Unmarshal(raw, &t) != nil {
			return nil, InvalidRequest(at, "%s must be an object with a role and a content", at).WithCode(CodeInvalidType)
		}
		if t.Role != RoleUser && t.Role != RoleAssistant {
			return nil, InvalidRequest(at+".role", `%s.role must be "user" or "assistant", got %q`, at, t.Role).WithCode(CodeInvalidValue)
		}
		text, e := anthropicText(at+".content", t.Content)
		if e != nil {
			return nil, e
		}
		if text.blocks == nil && jsonKind(t.Content) != kindString {
			return nil, InvalidRequest(at+".content", "%s.content is required: a string or an array of content blocks", at).WithCode(CodeMissingParameter)
		}
		switch {
		case i == len(r.Messages)-1 && t.Role == RoleAssistant:
			return nil, InvalidRequest(at+".role", "the last message must be a user message: continuing an assistant message (prefill) is not supported").WithCode(CodeUnsupportedValue)
		case text.blocks != nil && t.Role == RoleUser:
			add(t.Role, text.parts())
		default:
			add(t.Role, text.joined())
		}
	}
	creq := &ChatCompletionRequest{Model: r.Model, Messages: msgs, MaxTokens: r.MaxTokens, Stop: StopList(r.StopSequences),
		Stream: r.Stream, Temperature: r.Temperature, TopP: r.TopP}
	if r.Metadata != nil {
		creq.User = r.Metadata.UserID
	}
	if e := creq.Validate(); e != nil {
		return nil, e
	}
	return creq, nil
}

// validate checks what Chat does not: the fields a chat request lacks or
// bounds otherwise.
func (r *MessagesRequest) validate() *Error {
	switch {
	case r.Messages == nil:
		return InvalidRequest("messages", "messages is required: an array of messages").WithCode(CodeMissingParameter)
	case len(r.Messages) == 0:
		return InvalidRequest("messages", "messages must not be empty").WithCode(CodeEmptyArray)
	case r.MaxTokens == nil:
		return InvalidRequest("max_tokens", "max_tokens is required").WithCode(CodeMissingParameter)
	case r.TopK != nil:
		return InvalidRequest("top_k", "top_k is not supported by this server; use temperature or top_p").WithCode(CodeUnsupportedValue)
	case len(r.Tools) > 0:
		return InvalidRequest("tools", "tools are not supported by this server's Messages API").WithCode(CodeUnsupportedValue)
	}
	if e := intRange("max_tokens", r.MaxTokens, 1, 1<<31-1); e != nil {
		return e
	}
	// Anthropic's bound, narrower than OpenAI's 2.
	if e := decimalRange("temperature", r.Temperature, 0, 1, false); e != nil {
		return e
	}
	if e := decimalRange("top_p", r.TopP, 0, 1, true); e != nil {
		return e
	}
	if e := StopList(r.StopSequences).Validate(); e != nil {
		e.Param = new(strings.Replace(*e.Param, "stop", "stop_sequences", 1))
		e.Message = strings.Replace(e.Message, "stop", "stop_sequences", 1)
		return e
	}
	if present(r.Thinking) {
		var th struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(r.Thinking, &th) != nil || th.Type != "disabled" {
			return InvalidRequest("thinking", `extended thinking is not supported by this server: thinking must be {"type": "disabled"} or absent`).WithCode(CodeUnsupportedValue)
		}
	}
	return nil
}

// blockText is a content's text: a string, or the text of its blocks.
type blockText struct {
	text   string
	blocks []string // nil: the content was a string
}

func (t blockText) joined() string {
	if t.blocks == nil {
		return t.text
	}
	return strings.Join(t.blocks, "")
}

// parts are the blocks as chat text parts.
func (t blockText) parts() []map[string]string {
	out := make([]map[string]string, len(t.blocks))
	for i, s := range t.blocks {
		out[i] = map[string]string{"type": "text", "text": s}
	}
	return out
}

// anthropicText reads a content (or the system prompt): a string, or an
// array of text blocks; any other block is a 400 naming it.
func anthropicText(at string, raw json.RawMessage) (blockText, *Error) {
	switch jsonKind(raw) {
	case kindAbsent, kindNull:
		return blockText{}, nil
	case kindString:
		var s string
		_ = json.Unmarshal(raw, &s)
		return blockText{text: s}, nil
	case kindArray:
	default:
		return blockText{}, InvalidRequest(at, "%s must be a string or an array of content blocks, got %s", at, jsonKind(raw)).WithCode(CodeInvalidType)
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return blockText{}, InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidType)
	}
	if len(blocks) == 0 {
		return blockText{}, InvalidRequest(at, "%s must not be an empty array", at).WithCode(CodeEmptyArray)
	}
	out := blockText{blocks: make([]string, 0, len(blocks))}
	for j, raw := range blocks {
		bat := fmt.Sprintf("%s[%d]", at, j)
		var b messageBlock
		if jsonKind(raw) != kindObject || json.Unmarshal(raw, &b) != nil {
			return blockText{}, InvalidRequest(bat, "%s must be a content block: an object with a type", bat).WithCode(CodeInvalidType)
		}
		switch b.Type {
		case "text":
		case "image", "document":
			return blockText{}, InvalidRequest(bat+".type", "%s is an %s block: only text content is supported by this server", bat, b.Type).WithCode(CodeUnsupportedValue)
		case "tool_use", "tool_result", "server_tool_use", "web_search_tool_result":
			return blockText{}, InvalidRequest(bat+".type", "%s is a %s block: tools are not supported by this server's Messages API", bat, b.Type).WithCode(CodeUnsupportedValue)
		default:
			return blockText{}, InvalidRequest(bat+".type", "%s has type %q: only text blocks are supported by this server", bat, b.Type).WithCode(CodeUnsupportedValue)
		}
		text, e := stringMember(bat+".text", b.Text, true)
		if e != nil {
			return blockText{}, e
		}
		out.blocks = append(out.blocks, text)
	}
	return out, nil
}
