package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Anthropic's Messages API (POST /v1/messages), served as a chat
// completion: the request becomes the chat request of the same
// conversation (Chat), so that its text is the chat completion's; tool
// calls read out of the answer become tool_use blocks. What a chat
// completion cannot carry is refused with a 400 that names the
// parameter: images and documents, top_k, and an assistant turn last (a
// prefill, which a chat template cannot continue). What agent clients
// send that changes nothing the fleet can do is accepted: thinking of any
// type (extended thinking is the template's switch, when it has one),
// system turns inside messages, server tools (left out of the prompt).

// MessagesRequest is the body of POST /v1/messages (and of
// /v1/messages/count_tokens, which reads the same fields).
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

	// Grammar is the grammar engine of the engines that serve the
	// request, which checks its required call.
	Grammar SchemaGrammar `json:"-"`
}

// MessagesMetadata is a request's metadata; the session user_id names
// becomes the chat request's prompt_cache_key (see sessionOfUserID).
type MessagesMetadata struct {
	UserID *string `json:"user_id,omitempty"`
}

// sessionOfUserID is the session a Messages request's metadata.user_id
// names. Claude Code writes a JSON object with its session_id in it
// (earlier versions a string ending "_session_<id>"), beside an account
// and a device, which are not the conversation and must not key its
// routing; any other value is the key as it is.
func sessionOfUserID(id string) string {
	var obj struct {
		SessionID string `json:"session_id"`
	}
	if strings.HasPrefix(strings.TrimSpace(id), "{") && json.Unmarshal([]byte(id), &obj) == nil && obj.SessionID != "" {
		return obj.SessionID
	}
	const marker = "_session_"
	if i := strings.LastIndex(id, marker); i >= 0 && i+len(marker) < len(id) {
		return id[i+len(marker):]
	}
	return id
}

// messageTurn is one element of messages, its content a string or an
// array of blocks.
type messageTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messageBlock is a content block of a request.
type messageBlock struct {
	Type      string          `json:"type"`
	Text      json.RawMessage `json:"text"`
	ID        string          `json:"id"`          // tool_use
	Name      string          `json:"name"`        // tool_use
	Input     json.RawMessage `json:"input"`       // tool_use
	ToolUseID string          `json:"tool_use_id"` // tool_result
	Content   json.RawMessage `json:"content"`     // tool_result
	IsError   bool            `json:"is_error"`    // tool_result
}

// Chat checks the request and returns the chat completion request of the
// same conversation: the system prompt (with the text of any system turn
// in messages) as a system message, each turn a message — a user turn's
// text blocks as text parts, its tool_result blocks as tool messages, an
// assistant turn's text joined and its tool_use blocks as tool calls —
// and the tools as chat's function tools.
func (r *MessagesRequest) Chat() (*ChatCompletionRequest, *Error) {
	if e := r.validate(); e != nil {
		return nil, e
	}
	system, e := anthropicText("system", r.System)
	if e != nil {
		return nil, e
	}
	systemText := []string{}
	if t := system.joined(); t != "" {
		systemText = append(systemText, t)
	}
	var msgs []json.RawMessage
	for i, raw := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		var t messageTurn
		if json.Unmarshal(raw, &t) != nil {
			return nil, InvalidRequest(at, "%s must be an object with a role and a content", at).WithCode(CodeInvalidType)
		}
		switch {
		case t.Role == RoleSystem:
			text, e := anthropicText(at+".content", t.Content)
			if e != nil {
				return nil, e
			}
			systemText = append(systemText, text.joined())
			continue
		case t.Role != RoleUser && t.Role != RoleAssistant:
			return nil, InvalidRequest(at+".role", `%s.role must be "user" or "assistant", got %q`, at, t.Role).WithCode(CodeInvalidValue)
		case i == len(r.Messages)-1 && t.Role == RoleAssistant:
			return nil, InvalidRequest(at+".role", "the last message must be a user message: continuing an assistant message (prefill) is not supported").WithCode(CodeUnsupportedValue)
		}
		turn, e := anthropicTurn(at, t)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, turn...)
	}
	if len(msgs) == 0 {
		return nil, InvalidRequest("messages", "messages must hold a user turn, not only system turns").WithCode(CodeInvalidValue)
	}
	if len(systemText) > 0 {
		msgs = append([]json.RawMessage{chatMessage(RoleSystem, strings.Join(systemText, "\n\n"))}, msgs...)
	}
	creq := &ChatCompletionRequest{Model: r.Model, Messages: msgs, MaxTokens: r.MaxTokens, Stop: StopList(r.StopSequences),
		Stream: r.Stream, Temperature: r.Temperature, TopP: r.TopP, Thinking: r.thinking()}
	if r.Metadata != nil && r.Metadata.UserID != nil {
		creq.PromptCacheKey = new(sessionOfUserID(*r.Metadata.UserID))
	}
	if e := r.tools(creq); e != nil {
		return nil, e
	}
	creq.Grammar = r.Grammar
	if e := creq.Validate(); e != nil {
		return nil, e
	}
	return creq, nil
}

// anthropicTurn is one user or assistant turn as chat messages.
func anthropicTurn(at string, t messageTurn) ([]json.RawMessage, *Error) {
	content := at + ".content"
	switch jsonKind(t.Content) {
	case kindString:
		var s string
		_ = json.Unmarshal(t.Content, &s)
		return []json.RawMessage{chatMessage(t.Role, s)}, nil
	case kindArray:
	default:
		return nil, InvalidRequest(content, "%s is required: a string or an array of content blocks", content).WithCode(CodeMissingParameter)
	}
	blocks, e := messageBlocks(content, t.Content)
	if e != nil {
		return nil, e
	}
	if t.Role == RoleAssistant {
		return assistantTurn(content, blocks)
	}
	return userTurn(content, blocks)
}

// messageBlocks decodes an array of content blocks.
func messageBlocks(at string, raw json.RawMessage) ([]messageBlock, *Error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidType)
	}
	if len(raws) == 0 {
		return nil, InvalidRequest(at, "%s must not be an empty array", at).WithCode(CodeEmptyArray)
	}
	blocks := make([]messageBlock, len(raws))
	for j, b := range raws {
		bat := fmt.Sprintf("%s[%d]", at, j)
		if jsonKind(b) != kindObject || json.Unmarshal(b, &blocks[j]) != nil {
			return nil, InvalidRequest(bat, "%s must be a content block: an object with a type", bat).WithCode(CodeInvalidType)
		}
		switch blocks[j].Type {
		case BlockText, BlockToolUse, BlockToolResult, BlockThinking, "redacted_thinking":
		case "image", "document":
			return nil, InvalidRequest(bat+".type", "%s is an %s block: only text content is supported by this server", bat, blocks[j].Type).WithCode(CodeUnsupportedValue)
		default:
			return nil, InvalidRequest(bat+".type", "%s has type %q: text, tool_use, tool_result and thinking blocks are supported by this server", bat, blocks[j].Type).WithCode(CodeUnsupportedValue)
		}
		if blocks[j].Type == BlockText {
			if _, e := stringMember(bat+".text", blocks[j].Text, true); e != nil {
				return nil, e
			}
		}
	}
	return blocks, nil
}

// blockString is a text block's text (checked by messageBlocks).
func blockString(b messageBlock) string {
	var s string
	_ = json.Unmarshal(b.Text, &s)
	return s
}

// userTurn is a user turn's blocks as chat messages, in order: each run
// of text blocks one user message (its blocks text parts), each
// tool_result a tool message.
func userTurn(at string, blocks []messageBlock) ([]json.RawMessage, *Error) {
	var out []json.RawMessage
	var parts []map[string]string
	endText := func() {
		if parts != nil {
			out = append(out, chatMessage(RoleUser, parts))
			parts = nil
		}
	}
	for j, b := range blocks {
		switch b.Type {
		case BlockText:
			parts = append(parts, map[string]string{"type": "text", "text": blockString(b)})
		case BlockToolResult:
			endText()
			bat := fmt.Sprintf("%s[%d]", at, j)
			if b.ToolUseID == "" {
				return nil, InvalidRequest(bat+".tool_use_id", "%s.tool_use_id is required", bat).WithCode(CodeMissingParameter)
			}
			result, e := anthropicText(bat+".content", b.Content)
			if e != nil {
				return nil, e
			}
			text := result.joined()
			if b.IsError {
				text = "Error: " + text
			}
			out = append(out, toolMessage(b.ToolUseID, text))
		case BlockToolUse:
			return nil, InvalidRequest(fmt.Sprintf("%s[%d].type", at, j), "a tool_use block belongs to an assistant turn").WithCode(CodeInvalidValue)
		}
	}
	endText()
	if out == nil { // thinking blocks only
		out = append(out, chatMessage(RoleUser, ""))
	}
	return out, nil
}

// assistantTurn is an assistant turn's blocks as one chat message: its
// text blocks joined, its tool_use blocks its calls (thinking is the
// model's own and is not sent back).
func assistantTurn(at string, blocks []messageBlock) ([]json.RawMessage, *Error) {
	var text strings.Builder
	var calls []ToolCall
	for j, b := range blocks {
		switch b.Type {
		case BlockText:
			text.WriteString(blockString(b))
		case BlockToolUse:
			bat := fmt.Sprintf("%s[%d]", at, j)
			if b.Name == "" {
				return nil, InvalidRequest(bat+".name", "%s.name is required", bat).WithCode(CodeMissingParameter)
			}
			if jsonKind(b.Input) != kindObject {
				return nil, InvalidRequest(bat+".input", "%s.input must be an object", bat).WithCode(CodeInvalidType)
			}
			calls = append(calls, chatToolCall(b.ID, b.Name, b.Input))
		case BlockToolResult:
			return nil, InvalidRequest(fmt.Sprintf("%s[%d].type", at, j), "a tool_result block belongs to a user turn").WithCode(CodeInvalidValue)
		}
	}
	if calls == nil {
		return []json.RawMessage{chatMessage(RoleAssistant, text.String())}, nil
	}
	return []json.RawMessage{assistantToolCalls(text.String(), calls)}, nil
}

// tools sets creq's tools and tool choice from the request's: custom
// tools (no type, or "custom") become function tools; server tools
// (web_search_…, bash_…, text_editor_…), which the fleet cannot run, are
// left out and named in the chat request's SkippedTools.
func (r *MessagesRequest) tools(creq *ChatCompletionRequest) *Error {
	custom := func(typ string) bool { return typ == "" || typ == "custom" }
	names, e := addFunctionTools(creq, r.Tools, custom, "input_schema")
	if e != nil {
		return e
	}
	if !present(r.ToolChoice) {
		return nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if jsonKind(r.ToolChoice) != kindObject || json.Unmarshal(r.ToolChoice, &c) != nil {
		return InvalidRequest("tool_choice", "tool_choice must be an object with a type").WithCode(CodeInvalidType)
	}
	switch c.Type {
	case "auto":
	case "any":
		creq.ToolChoice = json.RawMessage(`"required"`)
	case "none":
		creq.ToolChoice = json.RawMessage(`"none"`)
	case "tool":
		if !hasName(names, c.Name) {
			return InvalidRequest("tool_choice.name", "tool_choice names tool %q, which is not among the request's tools", c.Name).WithCode(CodeInvalidValue)
		}
		creq.ToolChoice = namedToolChoice(c.Name)
	default:
		return InvalidRequest("tool_choice.type", `tool_choice.type must be "auto", "any", "tool" or "none", got %q`, c.Type).WithCode(CodeInvalidValue)
	}
	if len(creq.Tools) == 0 {
		creq.ToolChoice = nil // a choice among no tools is no choice
	}
	return nil
}

// thinking is whether the request asks for the model's thinking: nil when
// it says nothing, so that the template's own default holds.
func (r *MessagesRequest) thinking() *bool {
	var th struct {
		Type string `json:"type"`
	}
	if !present(r.Thinking) || json.Unmarshal(r.Thinking, &th) != nil {
		return nil
	}
	on := th.Type != "disabled"
	return &on
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
	case present(r.Thinking) && jsonKind(r.Thinking) != kindObject:
		return InvalidRequest("thinking", "thinking must be an object with a type").WithCode(CodeInvalidType)
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
