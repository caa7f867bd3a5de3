package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI's Responses API (POST /v1/responses), served as a chat
// completion: the conversation (a previous response's, then this
// request's input) becomes the chat request of the same turns (Chat), so
// that its text is the chat completion's. What a chat completion cannot
// carry is refused with a 400 that names the parameter: tools and items
// other than messages, images and files, reasoning, structured output,
// background runs.

// ResponsesRequest is the body of POST /v1/responses.
type ResponsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions,omitempty"`
	MaxOutputTokens    *int              `json:"max_output_tokens,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	Stream             bool              `json:"stream,omitempty"`
	Store              *bool             `json:"store,omitempty"`
	PreviousResponseID *string           `json:"previous_response_id,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	User               *string           `json:"user,omitempty"`
	Tools              []json.RawMessage `json:"tools,omitempty"`
	Text               *ResponseText     `json:"text,omitempty"`
	Reasoning          *struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning,omitempty"`
	Truncation *string `json:"truncation,omitempty"`
	Background bool    `json:"background,omitempty"`
}

// Bounds of a request's metadata, OpenAI's.
const (
	MaxMetadataPairs      = 16
	MaxMetadataKeyBytes   = 64
	MaxMetadataValueBytes = 512
)

// Validate checks the request's fields other than input (see Items).
func (r *ResponsesRequest) Validate() *Error {
	if e := intRange("max_output_tokens", r.MaxOutputTokens, 1, 1<<31-1); e != nil {
		return e
	}
	s := Sampling{Temperature: r.Temperature, TopP: r.TopP}
	if e := s.Validate(); e != nil {
		return e
	}
	switch {
	case len(r.Tools) > 0:
		return InvalidRequest("tools", "tools are not supported by this server's Responses API").WithCode(CodeUnsupportedValue)
	case r.Text != nil && r.Text.Format.Type != "" && r.Text.Format.Type != "text":
		return InvalidRequest("text.format.type", `text.format.type must be "text" (structured output is not supported by this server), got %q`, r.Text.Format.Type).WithCode(CodeUnsupportedValue)
	case r.Reasoning != nil && (r.Reasoning.Effort != nil || r.Reasoning.Summary != nil):
		return InvalidRequest("reasoning", "reasoning is not supported by this server: the model's answer is its text").WithCode(CodeUnsupportedValue)
	case r.Truncation != nil && *r.Truncation != "disabled":
		return InvalidRequest("truncation", `truncation must be "disabled" (a conversation that does not fit the context is a 400), got %q`, *r.Truncation).WithCode(CodeUnsupportedValue)
	case r.Background:
		return InvalidRequest("background", "background responses are not supported by this server").WithCode(CodeUnsupportedValue)
	case len(r.Metadata) > MaxMetadataPairs:
		return InvalidRequest("metadata", "metadata takes at most %d pairs", MaxMetadataPairs).WithCode(CodeInvalidValue)
	}
	for k, v := range r.Metadata {
		if len(k) > MaxMetadataKeyBytes || len(v) > MaxMetadataValueBytes {
			return InvalidRequest("metadata", "metadata keys are at most %d bytes and values %d; %q is not", MaxMetadataKeyBytes, MaxMetadataValueBytes, k).WithCode(CodeStringTooLong)
		}
	}
	return nil
}

// Items returns the input as message items, each with a new id: a string
// is one user message; a list holds messages (the type "message" or
// none) with roles user, system, developer or assistant, their content a
// string or text parts.
func (r *ResponsesRequest) Items() ([]ResponseMessage, *Error) {
	switch jsonKind(r.Input) {
	case kindString:
		var s string
		_ = json.Unmarshal(r.Input, &s)
		return []ResponseMessage{inputMessage(RoleUser, s)}, nil
	case kindArray:
	case kindAbsent, kindNull:
		return nil, InvalidRequest("input", "input is required: a string or a list of messages").WithCode(CodeMissingParameter)
	default:
		return nil, InvalidRequest("input", "input must be a string or a list of messages, got %s", jsonKind(r.Input)).WithCode(CodeInvalidType)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(r.Input, &raws); err != nil {
		return nil, InvalidRequest("input", "input: %v", err).WithCode(CodeInvalidType)
	}
	if len(raws) == 0 {
		return nil, InvalidRequest("input", "input must not be an empty list").WithCode(CodeEmptyArray)
	}
	items := make([]ResponseMessage, len(raws))
	for i, raw := range raws {
		m, e := inputItem(fmt.Sprintf("input[%d]", i), raw)
		if e != nil {
			return nil, e
		}
		items[i] = m
	}
	return items, nil
}

// inputMessage is a message item of text.
func inputMessage(role, text string) ResponseMessage {
	typ := ContentInputText
	if role == RoleAssistant {
		typ = ContentOutputText
	}
	return ResponseMessage{ID: NewID("msg_"), Type: "message", Role: role, Status: "completed", Content: []ResponseContent{{Type: typ, Text: text}}}
}

// inputItem reads one item of an input list.
func inputItem(at string, raw json.RawMessage) (ResponseMessage, *Error) {
	var it struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &it) != nil {
		return ResponseMessage{}, InvalidRequest(at, "%s must be a message: an object with a role and a content", at).WithCode(CodeInvalidType)
	}
	if it.Type != "" && it.Type != "message" {
		return ResponseMessage{}, InvalidRequest(at+".type", `%s is a %q item: only message items are supported by this server (no tools or reasoning)`, at, it.Type).WithCode(CodeUnsupportedValue)
	}
	switch it.Role {
	case RoleUser, RoleSystem, RoleDeveloper, RoleAssistant:
	default:
		return ResponseMessage{}, InvalidRequest(at+".role", `%s.role must be "user", "system", "developer" or "assistant", got %q`, at, it.Role).WithCode(CodeInvalidValue)
	}
	switch jsonKind(it.Content) {
	case kindString:
		var s string
		_ = json.Unmarshal(it.Content, &s)
		return inputMessage(it.Role, s), nil
	case kindArray:
	default:
		return ResponseMessage{}, InvalidRequest(at+".content", "%s.content must be a string or a list of text parts, got %s", at, jsonKind(it.Content)).WithCode(CodeInvalidType)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(it.Content, &parts); err != nil || len(parts) == 0 {
		return ResponseMessage{}, InvalidRequest(at+".content", "%s.content must be a string or a non-empty list of text parts", at).WithCode(CodeInvalidType)
	}
	want := ContentInputText
	if it.Role == RoleAssistant {
		want = ContentOutputText
	}
	m := inputMessage(it.Role, "")
	m.Content = m.Content[:0]
	for j, raw := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		var p struct {
			Type string          `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if jsonKind(raw) != kindObject || json.Unmarshal(raw, &p) != nil {
			return ResponseMessage{}, InvalidRequest(pat, "%s must be a content part: an object with a type", pat).WithCode(CodeInvalidType)
		}
		if p.Type != want {
			return ResponseMessage{}, InvalidRequest(pat+".type", "%s has type %q: a %s message's content is %s parts (images, files and other parts are not supported by this server)",
				pat, p.Type, it.Role, want).WithCode(CodeUnsupportedValue)
		}
		text, e := stringMember(pat+".text", p.Text, true)
		if e != nil {
			return ResponseMessage{}, e
		}
		m.Content = append(m.Content, ResponseContent{Type: want, Text: text})
	}
	return m, nil
}

// Chat returns the chat completion request of the conversation: the
// instructions, then the conversation so far (history: a previous
// response's items, its output included), then input. The instructions
// and the system and developer messages that begin the conversation are
// one system message, joined by a blank line, as a chat template renders
// one system prompt; a system or developer message later is a 400. A
// message's text parts are joined without a separator, as templates join
// parts.
func (r *ResponsesRequest) Chat(history, input []ResponseMessage) (*ChatCompletionRequest, *Error) {
	var system []string
	if r.Instructions != nil && *r.Instructions != "" {
		system = append(system, *r.Instructions)
	}
	var msgs []json.RawMessage
	for i, m := range append(append([]ResponseMessage(nil), history...), input...) {
		text := m.Text()
		if m.Role == RoleSystem || m.Role == RoleDeveloper {
			if len(msgs) > 0 {
				at := "input"
				if i >= len(history) {
					at = fmt.Sprintf("input[%d]", i-len(history))
				}
				return nil, InvalidRequest(at+".role", "a %s message is only supported at the start of the conversation, before any user or assistant message", m.Role).WithCode(CodeUnsupportedValue)
			}
			system = append(system, text)
			continue
		}
		if len(msgs) == 0 && len(system) > 0 {
			msgs = append(msgs, chatMessage(RoleSystem, strings.Join(system, "\n\n")))
		}
		msgs = append(msgs, chatMessage(m.Role, text))
	}
	if len(msgs) == 0 {
		return nil, InvalidRequest("input", "input must hold a user message").WithCode(CodeInvalidValue)
	}
	creq := &ChatCompletionRequest{Model: r.Model, Messages: msgs, MaxTokens: r.MaxOutputTokens, Stream: r.Stream,
		Temperature: r.Temperature, TopP: r.TopP, User: r.User}
	if e := creq.Validate(); e != nil {
		return nil, e
	}
	return creq, nil
}
