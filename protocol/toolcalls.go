package protocol

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// Tool calls on the way in and out of the three generation APIs that
// carry them (chat completions, Messages, Responses). The router reads
// calls out of the generated text (router/toolcall) and writes them in
// each API's shape; these are the shapes.

// ToolCall is one call of an assistant message, as OpenAI's chat API
// writes it: arguments are a JSON object as a string.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is a called function's name and arguments (a JSON object,
// as a string).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolCallDelta is a call's piece in a chat chunk: the first names the
// call (id, type, name, no arguments yet), the next carry its arguments in
// pieces, each under the call's index.
type ToolCallDelta struct {
	Index    int                `json:"index"`
	ID       string             `json:"id,omitempty"`
	Type     string             `json:"type,omitempty"`
	Function *FunctionCallDelta `json:"function,omitempty"`
}

// FunctionCallDelta is a piece of a called function: its name, once, and
// a piece of its arguments.
type FunctionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool choices, as the router reads every API's: the model may call a
// tool (auto), must (required), must call the one named (function), or
// is not offered tools (none).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
	ToolChoiceFunction = "function"
)

// ToolCalling is how a chat answer's text is read for tool calls: the
// router's own knowledge of a request, never sent to an engine.
type ToolCalling struct {
	// Format names the parser of the model's tool-call syntax
	// (router/toolcall).
	Format string
	// Choice is one of the ToolChoice constants; Function the function
	// it names.
	Choice   string
	Function string
}

// chatToolChoice reads a checked chat tool_choice: absent, "auto",
// "required", "none", {"type": "function", "function": {"name": …}}, or
// allowed_tools, which is its mode ("auto" or "required", over the
// request's AllowedTools).
func chatToolChoice(raw json.RawMessage) (choice, function string) {
	switch jsonKind(raw) {
	case kindString:
		_ = json.Unmarshal(raw, &choice)
		return choice, ""
	case kindObject:
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			AllowedTools struct {
				Mode string `json:"mode"`
			} `json:"allowed_tools"`
		}
		_ = json.Unmarshal(raw, &c)
		if c.Type == toolChoiceAllowedTools {
			return c.AllowedTools.Mode, ""
		}
		return ToolChoiceFunction, c.Function.Name
	}
	return ToolChoiceAuto, ""
}

// ToolCalling returns how the request's answer is read for tool calls
// with the parser format, or nil when it offers no tools (or tool_choice
// is "none"): then its answer is text.
func (r *ChatCompletionRequest) ToolCalling(format string) *ToolCalling {
	choice, fn := chatToolChoice(r.ToolChoice)
	if len(r.Tools) == 0 || choice == ToolChoiceNone {
		return nil
	}
	return &ToolCalling{Format: format, Choice: choice, Function: fn}
}

// validateAssistantToolCalls checks an assistant message's tool_calls as
// OpenAI's API takes them: a non-empty array of {"id", "type":
// "function", "function": {"name", "arguments"}}, arguments a string.
func validateAssistantToolCalls(at string, raw json.RawMessage) *Error {
	if jsonKind(raw) != kindArray {
		return InvalidRequest(at, "%s must be an array of tool calls, got %s", at, jsonKind(raw)).WithCode(CodeInvalidType)
	}
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidType)
	}
	for i, c := range calls {
		cat := fmt.Sprintf("%s[%d]", at, i)
		var call struct {
			ID       json.RawMessage `json:"id"`
			Type     json.RawMessage `json:"type"`
			Function json.RawMessage `json:"function"`
		}
		if jsonKind(c) != kindObject || json.Unmarshal(c, &call) != nil {
			return InvalidRequest(cat, "%s must be a tool call: an object with an id, a type and a function", cat).WithCode(CodeInvalidType)
		}
		if _, e := stringMember(cat+".id", call.ID, false); e != nil {
			return e
		}
		if present(call.Type) {
			if e := functionType(cat+".type", call.Type); e != nil {
				return e
			}
		}
		var fn struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if jsonKind(call.Function) != kindObject || json.Unmarshal(call.Function, &fn) != nil {
			return InvalidRequest(cat+".function", "%s.function is required: an object with a name and arguments", cat).WithCode(CodeMissingParameter)
		}
		if _, e := stringMember(cat+".function.name", fn.Name, true); e != nil {
			return e
		}
		if _, e := stringMember(cat+".function.arguments", fn.Arguments, true); e != nil {
			return e
		}
	}
	return nil
}

// chatToolCall is an assistant's call as a chat request carries it, from
// the call's id, name and arguments (a JSON object's text).
func chatToolCall(id, name string, arguments json.RawMessage) ToolCall {
	args := "{}"
	if c := compactJSON(arguments); c != "" {
		args = c
	}
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

// compactJSON is raw without insignificant space, or "" when raw is not
// JSON.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// assistantToolCalls is a chat request's assistant message holding text
// (none: content null) and calls.
func assistantToolCalls(text string, calls []ToolCall) json.RawMessage {
	var content any
	if text != "" {
		content = text
	}
	b, _ := json.Marshal(struct {
		Role      string     `json:"role"`
		Content   any        `json:"content"`
		ToolCalls []ToolCall `json:"tool_calls"`
	}{RoleAssistant, content, calls})
	return b
}

// toolMessage is a chat request's tool message: the result of call id.
func toolMessage(id, content string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	}{RoleTool, content, id})
	return b
}

// chatTool is a chat request's function tool.
func chatTool(name string, description *string, parameters json.RawMessage) json.RawMessage {
	if !present(parameters) {
		parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	type function struct {
		Name        string          `json:"name"`
		Description *string         `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	b, _ := json.Marshal(struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}{"function", function{name, description, parameters}})
	return b
}

// namedToolChoice is a chat tool_choice naming function name.
func namedToolChoice(name string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
	return b
}

// hasName reports whether name is among names.
func hasName(names []string, name string) bool { return slices.Contains(names, name) }

// agentTool is a tool of the Messages or the Responses API: its type, its
// name and description, and its JSON schema (input_schema, parameters).
type agentTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Parameters  json.RawMessage `json:"parameters"`
}

// addFunctionTools sets creq's tools from an agent API's: those whose
// type runnable accepts become chat's function tools, their schema read
// from the member schemaParam names; the others, which the fleet cannot
// run, are left out and named in creq.SkippedTools. It returns the
// function tools' names.
func addFunctionTools(creq *ChatCompletionRequest, tools []json.RawMessage, runnable func(typ string) bool, schemaParam string) ([]string, *Error) {
	var names []string
	for i, raw := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		var t agentTool
		if jsonKind(raw) != kindObject || json.Unmarshal(raw, &t) != nil {
			return nil, InvalidRequest(at, "%s must be a tool: an object with a type or a name", at).WithCode(CodeInvalidType)
		}
		if !runnable(t.Type) {
			creq.SkippedTools = append(creq.SkippedTools, cmp.Or(t.Name, t.Type))
			continue
		}
		if t.Name == "" {
			return nil, InvalidRequest(at+".name", "%s.name is required", at).WithCode(CodeMissingParameter)
		}
		schema := t.Parameters
		if schemaParam == "input_schema" {
			schema = t.InputSchema
		}
		if present(schema) && jsonKind(schema) != kindObject {
			return nil, InvalidRequest(at+"."+schemaParam, "%s.%s must be a JSON schema object", at, schemaParam).WithCode(CodeInvalidType)
		}
		creq.Tools = append(creq.Tools, chatTool(t.Name, t.Description, schema))
		creq.ToolSchemaParams = append(creq.ToolSchemaParams, at+"."+schemaParam)
		names = append(names, t.Name)
	}
	return names, nil
}
