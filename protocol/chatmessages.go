package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// Checks of a chat request's messages and tools. They apply MLC-LLM's
// ChatCompletionMessage model (role, and the types of content, name,
// tool_calls and tool_call_id) and its check_message_validity, and require
// content as OpenAI does: a role is a closed set, not free text that a
// template would copy into the prompt (a role with a newline forges turns),
// and a message without content has nothing to render.

// Roles of chat messages.
const (
	RoleSystem = "system"
	RoleUser   = "user"
	RoleTool   = "tool"
)

var chatRoles = []string{RoleSystem, RoleUser, RoleAssistant, RoleTool}

// chatMessageFields are the members of a message that are checked; each is
// nil when absent and "null" when null.
type chatMessageFields struct {
	Role       json.RawMessage `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       json.RawMessage `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
}

// validateMessages checks every message, returning the first error.
func validateMessages(msgs []json.RawMessage) *Error {
	if msgs == nil {
		return InvalidRequest("messages", "messages is required: an array of messages").WithCode(CodeMissingParameter)
	}
	if len(msgs) == 0 {
		return InvalidRequest("messages", "messages must not be empty").WithCode(CodeEmptyArray)
	}
	for i, raw := range msgs {
		if e := validateMessage(i, raw); e != nil {
			return e
		}
	}
	return nil
}

func validateMessage(i int, raw json.RawMessage) *Error {
	at := fmt.Sprintf("messages[%d]", i)
	if jsonKind(raw) != kindObject {
		return InvalidRequest(at, "%s must be an object with a role and a content, got %s", at, jsonKind(raw)).WithCode(CodeInvalidType)
	}
	var m chatMessageFields
	if err := unmarshalExact(raw, &m); err != nil {
		return InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidType)
	}
	role, e := stringMember(at+".role", m.Role, true)
	if e != nil {
		return e
	}
	if !slices.Contains(chatRoles, role) {
		return InvalidRequest(at+".role", `%s.role must be "system", "user", "assistant" or "tool", got %q`, at, role).WithCode(CodeInvalidValue)
	}
	if _, e := stringMember(at+".name", m.Name, false); e != nil {
		return e
	}
	if _, e := stringMember(at+".tool_call_id", m.ToolCallID, false); e != nil {
		return e
	}
	content := jsonKind(m.Content)
	switch {
	case role == RoleSystem && i != 0:
		return InvalidRequest(at+".role", "a system message is only allowed first, as messages[0]; %s is one", at).WithCode(CodeInvalidValue)
	case present(m.ToolCallID) && role != RoleTool:
		return InvalidRequest(at+".tool_call_id", "only tool messages may have tool_call_id; %s is a %s message", at, role).WithCode(CodeInvalidValue)
	case content == kindArray && role != RoleUser:
		return InvalidRequest(at+".content", "only user messages may have an array of content parts; a %s message's content is a string", role).WithCode(CodeInvalidType)
	case present(m.ToolCalls) && role != RoleAssistant:
		return InvalidRequest(at+".tool_calls", "only assistant messages may have tool_calls; %s is a %s message", at, role).WithCode(CodeInvalidValue)
	case present(m.ToolCalls):
		if e := validateAssistantToolCalls(at+".tool_calls", m.ToolCalls); e != nil {
			return e
		}
		// An assistant turn that only calls has no content, or null.
		if content == kindAbsent || content == kindNull {
			return nil
		}
	}
	switch content {
	case kindString:
		return nil
	case kindArray:
		return validateContentParts(at+".content", m.Content)
	case kindAbsent:
		return InvalidRequest(at+".content", "%s.content is required", at).WithCode(CodeMissingParameter)
	}
	want := "a string"
	if role == RoleUser {
		want = "a string or an array of content parts"
	}
	return InvalidRequest(at+".content", "%s.content must be %s, got %s", at, want, content).WithCode(CodeInvalidType)
}

// validateContentParts checks a user message's array content: not empty,
// each part an object with a type, and a text part with its text.
func validateContentParts(at string, raw json.RawMessage) *Error {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidType)
	}
	if len(parts) == 0 {
		return InvalidRequest(at, "%s must not be an empty array", at).WithCode(CodeEmptyArray)
	}
	for j, part := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		if jsonKind(part) != kindObject {
			return InvalidRequest(pat, "%s must be an object with a type, got %s", pat, jsonKind(part)).WithCode(CodeInvalidType)
		}
		var p struct {
			Type json.RawMessage `json:"type"`
			Text json.RawMessage `json:"text"`
		}
		if err := unmarshalExact(part, &p); err != nil {
			return InvalidRequest(pat, "%s: %v", pat, err).WithCode(CodeInvalidType)
		}
		typ, e := stringMember(pat+".type", p.Type, true)
		if e != nil {
			return e
		}
		if typ == "text" {
			if _, e := stringMember(pat+".text", p.Text, true); e != nil {
				return e
			}
		}
	}
	return nil
}

// validateTools checks tools as MLC-LLM's ChatTool model does, with
// OpenAI's own latitude where clients use it (a function's strict flag,
// parameters optional), and that tool_choice is one of OpenAI's choices
// ("required" included: the router reads calls out of the answer itself),
// naming a given tool, or allowing some (allowed_tools: their names are
// returned, nil for any other choice).
func validateTools(tools []json.RawMessage, choice json.RawMessage) ([]string, *Error) {
	var names []string
	for i, raw := range tools {
		name, e := validateTool(fmt.Sprintf("tools[%d]", i), raw)
		if e != nil {
			return nil, e
		}
		names = append(names, name)
	}
	const allowed = `"none", "auto", "required", {"type": "function", "function": {"name": ...}} or {"type": "allowed_tools", "allowed_tools": {...}}`
	switch jsonKind(choice) {
	case kindAbsent, kindNull:
		return nil, nil
	case kindString:
		var s string
		_ = json.Unmarshal(choice, &s)
		switch s {
		case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
			return nil, nil
		}
		return nil, InvalidRequest("tool_choice", "tool_choice must be %s, got %q", allowed, s).WithCode(CodeInvalidValue)
	case kindObject:
	default:
		return nil, InvalidRequest("tool_choice", "tool_choice must be %s, got %s", allowed, jsonKind(choice)).WithCode(CodeInvalidType)
	}
	var c struct {
		Type     json.RawMessage            `json:"type"`
		Function map[string]json.RawMessage `json:"function"`
	}
	if err := checkKeyCase(choice, reflect.TypeOf(c)); err != nil {
		return nil, InvalidRequest("tool_choice", "tool_choice: %v", err).WithCode(CodeInvalidValue)
	}
	if err := json.Unmarshal(choice, &c); err != nil {
		return nil, InvalidRequest("tool_choice.function", "tool_choice.function must be an object with a name").WithCode(CodeInvalidType)
	}
	typ, e := stringMember("tool_choice.type", c.Type, true)
	switch {
	case e != nil:
		return nil, e
	case typ == toolChoiceAllowedTools:
		return validateAllowedTools(choice, names)
	case typ != "function":
		return nil, InvalidRequest("tool_choice.type", `tool_choice.type must be "function" or "allowed_tools", got %q`, typ).WithCode(CodeInvalidValue)
	}
	if c.Function == nil {
		return nil, InvalidRequest("tool_choice.function", "tool_choice.function is required: an object with a name").WithCode(CodeMissingParameter)
	}
	name, e := stringMember("tool_choice.function.name", c.Function["name"], true)
	if e != nil {
		return nil, e
	}
	if len(c.Function) > 1 {
		return nil, InvalidRequest("tool_choice.function", "tool_choice.function takes only a name: one tool is chosen by name").WithCode(CodeInvalidValue)
	}
	if !slices.Contains(names, name) {
		return nil, InvalidRequest("tool_choice.function.name", "tool_choice names function %q, which is not among the request's tools", name).WithCode(CodeInvalidValue)
	}
	return nil, nil
}

// validateTool checks one tool, {"type": "function", "function": {"name":
// ..., "parameters": {...}}}, and returns its function's name.
func validateTool(at string, raw json.RawMessage) (string, *Error) {
	if jsonKind(raw) != kindObject {
		return "", InvalidRequest(at, "%s must be an object, got %s", at, jsonKind(raw)).WithCode(CodeInvalidType)
	}
	var t struct {
		Type     json.RawMessage `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := unmarshalExact(raw, &t); err != nil {
		return "", InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidValue)
	}
	if e := functionType(at+".type", t.Type); e != nil {
		return "", e
	}
	fn := at + ".function"
	switch jsonKind(t.Function) {
	case kindObject:
	case kindAbsent, kindNull:
		return "", InvalidRequest(fn, "%s is required: an object with a name and parameters", fn).WithCode(CodeMissingParameter)
	default:
		return "", InvalidRequest(fn, "%s must be an object, got %s", fn, jsonKind(t.Function)).WithCode(CodeInvalidType)
	}
	var f struct {
		Name        json.RawMessage `json:"name"`
		Description json.RawMessage `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"` // OpenAI's structured-outputs flag: the router's parsers check every call's JSON
	}
	if err := unmarshalExact(t.Function, &f); err != nil {
		return "", InvalidRequest(fn, "%s: %v", fn, err).WithCode(CodeInvalidValue)
	}
	name, e := stringMember(fn+".name", f.Name, true)
	if e != nil {
		return "", e
	}
	if name == "" {
		return "", InvalidRequest(fn+".name", "%s.name must not be empty", fn).WithCode(CodeInvalidValue)
	}
	if _, e := stringMember(fn+".description", f.Description, false); e != nil {
		return "", e
	}
	switch jsonKind(f.Parameters) {
	case kindObject, kindAbsent, kindNull: // OpenAI's parameters are optional: a function without any
		return name, nil
	}
	return "", InvalidRequest(fn+".parameters", "%s.parameters must be a JSON schema object, got %s", fn, jsonKind(f.Parameters)).WithCode(CodeInvalidType)
}

// functionType checks a tool's or tool choice's type: "function".
func functionType(param string, raw json.RawMessage) *Error {
	typ, e := stringMember(param, raw, true)
	if e != nil {
		return e
	}
	if typ != "function" {
		return InvalidRequest(param, `%s must be "function", got %q`, param, typ).WithCode(CodeInvalidValue)
	}
	return nil
}

// stringMember reads a member that must be a string, and when required
// must be present and not null.
func stringMember(param string, raw json.RawMessage, required bool) (string, *Error) {
	switch jsonKind(raw) {
	case kindString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", InvalidRequest(param, "%s: %v", param, err).WithCode(CodeInvalidType)
		}
		return s, nil
	case kindAbsent, kindNull:
		if !required {
			return "", nil
		}
		return "", InvalidRequest(param, "%s is required: a string", param).WithCode(CodeMissingParameter)
	}
	return "", InvalidRequest(param, "%s must be a string, got %s", param, jsonKind(raw)).WithCode(CodeInvalidType)
}

// present reports whether a member is there and not null.
func present(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k != kindAbsent && k != kindNull
}

// jsonValueKind is the kind of a JSON value, named for error messages.
type jsonValueKind string

const (
	kindAbsent jsonValueKind = "nothing"
	kindNull   jsonValueKind = "null"
	kindString jsonValueKind = "a string"
	kindArray  jsonValueKind = "an array"
	kindObject jsonValueKind = "an object"
	kindBool   jsonValueKind = "a boolean"
	kindNumber jsonValueKind = "a number"
)

// jsonKind tells the kind of a raw value from its first byte; nil (an
// absent member) is kindAbsent.
func jsonKind(raw json.RawMessage) jsonValueKind {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return kindAbsent
	}
	switch raw[0] {
	case 'n':
		return kindNull
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	case 't', 'f':
		return kindBool
	}
	return kindNumber
}

// chatMessage is a chat request's message of role, its content text or
// parts: how the Messages and Responses APIs write the turns of the chat
// request they become.
func chatMessage(role string, content any) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}{role, content})
	return b
}
