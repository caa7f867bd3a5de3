package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI's Responses API (POST /v1/responses), served as a chat
// completion: the conversation (a previous response's, then this
// request's input) becomes the chat request of the same turns (Chat), so
// that its text is the chat completion's; function tools become chat's,
// and the calls read out of the answer function_call items. What a chat
// completion cannot carry is refused with a 400 that names the
// parameter: images and files, structured output, background runs,
// conversation objects. Tools the fleet cannot run (web_search,
// file_search, MCP, …) are left out of the prompt and named (SkippedTools);
// reasoning settings, for models that do not reason, are ignored.

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
	PromptCacheKey     *string           `json:"prompt_cache_key,omitempty"`
	Tools              []json.RawMessage `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	Text               *ResponseText     `json:"text,omitempty"`
	Truncation         *string           `json:"truncation,omitempty"`
	Background         bool              `json:"background,omitempty"`
	Conversation       json.RawMessage   `json:"conversation,omitempty"`

	// HostsMCP says the router runs the request's mcp tools (not a wire
	// field): they are not left out, and Hosted, their servers' tools, are
	// offered beside the function tools (responsesmcp.go).
	HostsMCP bool             `json:"-"`
	Hosted   []HostedFunction `json:"-"`
	// Grammar is the grammar engine of the engines that serve the
	// request, which checks its text format and required call.
	Grammar SchemaGrammar `json:"-"`
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
	if r.Text != nil {
		if e := r.Text.Format.Check(r.Grammar); e != nil {
			return e
		}
	}
	switch {
	case present(r.Conversation):
		return InvalidRequest("conversation", "conversation objects are not supported by this server: continue a conversation with previous_response_id").WithCode(CodeUnsupportedValue)
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
		if s == "" {
			return nil, InvalidRequest("input", "input must not be empty: the model would answer nothing asked").WithCode(CodeInvalidValue)
		}
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
	items := make([]ResponseMessage, 0, len(raws))
	for i, raw := range raws {
		m, keep, e := inputItem(fmt.Sprintf("input[%d]", i), raw)
		if e != nil {
			return nil, e
		}
		if keep {
			items = append(items, m)
		}
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

// inputItem reads one item of an input list: a message, a function_call
// (the model's, sent back) or a function_call_output; a reasoning item is
// passed over (keep false: the models served here do not read one back).
func inputItem(at string, raw json.RawMessage) (_ ResponseMessage, keep bool, _ *Error) {
	var it struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    json.RawMessage `json:"call_id"`
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &it) != nil {
		return ResponseMessage{}, false, InvalidRequest(at, "%s must be an item: a message, a function_call or a function_call_output", at).WithCode(CodeInvalidType)
	}
	switch it.Type {
	case "", ItemMessage:
	case "reasoning":
		return ResponseMessage{}, false, nil
	case ItemFunctionCall:
		m, e := functionCallItem(at, it.CallID, it.Name, it.Arguments)
		return m, e == nil, e
	case ItemFunctionCallOutput:
		m, e := functionOutputItem(at, it.CallID, it.Output)
		return m, e == nil, e
	case ItemMCPListTools, ItemMCPCall, ItemMCPApprovalRequest, ItemMCPApprovalResponse:
		m, e := mcpInputItem(at, it.Type, raw)
		return m, e == nil, e
	default:
		return ResponseMessage{}, false, InvalidRequest(at+".type", `%s is a %q item: message, function_call, function_call_output, reasoning and MCP items are supported by this server`, at, it.Type).WithCode(CodeUnsupportedValue)
	}
	m, e := messageItem(at, it.Role, it.Content)
	return m, e == nil, e
}

// functionCallItem reads a function_call item of an input.
func functionCallItem(at string, callID, name, arguments json.RawMessage) (ResponseMessage, *Error) {
	id, e := stringMember(at+".call_id", callID, true)
	if e != nil {
		return ResponseMessage{}, e
	}
	fn, e := stringMember(at+".name", name, true)
	if e != nil {
		return ResponseMessage{}, e
	}
	args, e := stringMember(at+".arguments", arguments, true)
	if e != nil {
		return ResponseMessage{}, e
	}
	return NewFunctionCall(NewID("fc_"), id, fn, args, ResponseCompleted), nil
}

// functionOutputItem reads a function_call_output item: its output a
// string, or text parts (joined).
func functionOutputItem(at string, callID, output json.RawMessage) (ResponseMessage, *Error) {
	id, e := stringMember(at+".call_id", callID, true)
	if e != nil {
		return ResponseMessage{}, e
	}
	var text string
	switch jsonKind(output) {
	case kindString:
		_ = json.Unmarshal(output, &text)
	case kindArray:
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(output, &parts); err != nil {
			return ResponseMessage{}, InvalidRequest(at+".output", "%s.output must be a string or a list of text parts", at).WithCode(CodeInvalidType)
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		text = b.String()
	default:
		return ResponseMessage{}, InvalidRequest(at+".output", "%s.output is required: a string", at).WithCode(CodeMissingParameter)
	}
	return ResponseMessage{ID: NewID("fco_"), Type: ItemFunctionCallOutput, CallID: id, Output: text, Status: ResponseCompleted}, nil
}

// messageItem reads a message item of an input.
func messageItem(at, role string, content json.RawMessage) (ResponseMessage, *Error) {
	it := struct {
		Role    string
		Content json.RawMessage
	}{role, content}
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
// and every system and developer message are one system message, joined
// by a blank line in their order, as a chat template renders one system
// prompt (agent clients send developer messages after the first turn). A
// message's text parts are joined without a separator, as templates join
// parts. function_call items become the calls of the assistant message
// they follow (or of one of their own), function_call_output items tool
// messages; the function tools become chat's.
func (r *ResponsesRequest) Chat(history, input []ResponseMessage) (*ChatCompletionRequest, *Error) {
	var system []string
	if r.Instructions != nil && *r.Instructions != "" {
		system = append(system, *r.Instructions)
	}
	var msgs, results []json.RawMessage
	var turn *assistantCalls // the assistant turn that calls may join; results: its hosted calls' results, after it
	flush := func() {
		if turn != nil {
			msgs = append(msgs, turn.message())
			turn = nil
		}
		msgs, results = append(msgs, results...), nil
	}
	all := append(append([]ResponseMessage(nil), history...), input...)
	for _, m := range all {
		switch {
		case isMCPItem(m.Type):
			if call, result, ok := mcpTurn(m, all); ok {
				if turn == nil {
					turn = &assistantCalls{}
				}
				turn.calls, results = append(turn.calls, call), append(results, result)
			}
		case m.Type == ItemFunctionCall:
			if turn == nil {
				turn = &assistantCalls{}
			}
			turn.calls = append(turn.calls, chatToolCall(m.CallID, m.Name, json.RawMessage(m.Arguments)))
		case m.Type == ItemFunctionCallOutput:
			flush()
			msgs = append(msgs, toolMessage(m.CallID, m.Output))
		case m.Role == RoleSystem || m.Role == RoleDeveloper:
			system = append(system, m.Text())
		case m.Role == RoleAssistant:
			flush()
			turn = &assistantCalls{text: m.Text()}
		default:
			flush()
			msgs = append(msgs, chatMessage(m.Role, m.Text()))
		}
	}
	flush()
	if len(msgs) == 0 {
		return nil, InvalidRequest("input", "input must hold a user message").WithCode(CodeInvalidValue)
	}
	if len(system) > 0 {
		msgs = append([]json.RawMessage{chatMessage(RoleSystem, strings.Join(system, "\n\n"))}, msgs...)
	}
	creq := &ChatCompletionRequest{Model: r.Model, Messages: msgs, MaxTokens: r.MaxOutputTokens, Stream: r.Stream,
		Temperature: r.Temperature, TopP: r.TopP, User: r.User, PromptCacheKey: r.PromptCacheKey}
	if r.Text != nil {
		creq.ResponseFormat = r.Text.Format.ResponseFormat()
	}
	if e := r.chatTools(creq); e != nil {
		return nil, e
	}
	creq.Grammar = r.Grammar
	if e := creq.Validate(); e != nil {
		return nil, e
	}
	return creq, nil
}

// assistantCalls is an assistant turn being read: its text and the calls
// that follow it.
type assistantCalls struct {
	text  string
	calls []ToolCall
}

func (a *assistantCalls) message() json.RawMessage {
	if a.calls == nil {
		return chatMessage(RoleAssistant, a.text)
	}
	return assistantToolCalls(a.text, a.calls)
}

// chatTools sets creq's tools and tool choice from the request's:
// function tools become chat's; the others (web_search, file_search,
// computer_use_preview, mcp, custom and namespace tools…), which the
// fleet cannot run, are left out and named in the chat request's SkippedTools.
func (r *ResponsesRequest) chatTools(creq *ChatCompletionRequest) *Error {
	function := func(typ string) bool { return typ == "function" }
	names, e := addFunctionTools(creq, r.Tools, function, "parameters")
	if e == nil {
		e = r.addHosted(creq, names)
	}
	if e != nil {
		return e
	}
	choice, e := r.chatToolChoice(names)
	if e != nil || len(creq.Tools) == 0 {
		return e
	}
	creq.ToolChoice = choice
	return nil
}

// chatToolChoice is the request's tool_choice as chat's: "auto", "none",
// "required", {"type": "function", "name": …}, or allowed_tools
// (responsesAllowedTools).
func (r *ResponsesRequest) chatToolChoice(names []string) (json.RawMessage, *Error) {
	switch jsonKind(r.ToolChoice) {
	case kindAbsent, kindNull:
		return nil, nil
	case kindString:
		var s string
		_ = json.Unmarshal(r.ToolChoice, &s)
		switch s {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
			return r.ToolChoice, nil
		}
		return nil, InvalidRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}, got %q`, s).WithCode(CodeInvalidValue)
	case kindObject:
	default:
		return nil, InvalidRequest("tool_choice", "tool_choice must be a string or an object, got %s", jsonKind(r.ToolChoice)).WithCode(CodeInvalidType)
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.ToolChoice, &c)
	switch c.Type {
	case "function":
		if !hasName(names, c.Name) {
			return nil, InvalidRequest("tool_choice.name", "tool_choice names function %q, which is not among the request's function tools", c.Name).WithCode(CodeInvalidValue)
		}
		return namedToolChoice(c.Name), nil
	case toolChoiceAllowedTools:
		return responsesAllowedTools(r.ToolChoice, names)
	}
	return nil, InvalidRequest("tool_choice.type", `tool_choice.type must be "function" or "allowed_tools", got %q`, c.Type).WithCode(CodeInvalidValue)
}
