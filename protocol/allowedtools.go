package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
)

// OpenAI's allowed_tools tool choice: every tool stays in the prompt (so
// that the prompt's prefix is the same turn after turn, and cached), and
// the model may call only the tools listed. Its mode is "required" (the
// answer is a call to one of them) or "auto" (the model may answer text).
// Chat writes it {"type": "allowed_tools", "allowed_tools": {"mode": …,
// "tools": [{"type": "function", "function": {"name": …}}, …]}}, the
// Responses API {"type": "allowed_tools", "mode": …, "tools": [{"type":
// "function", "name": …}, …]}; the Responses API's becomes chat's.
//
// A required choice is served as "required" over the allowed tools
// alone: the call's schema (ToolCallFormat) offers only theirs, so the
// model cannot call another. An auto choice is served as "auto": the
// answer's calls are read as they come, and a call of a tool outside the
// set is not stopped.

// toolChoiceAllowedTools is the type of an allowed_tools choice.
const toolChoiceAllowedTools = "allowed_tools"

// validateAllowedTools checks chat's allowed_tools choice against the
// request's function tools (names) and returns the tools it allows.
func validateAllowedTools(choice json.RawMessage, names []string) ([]string, *Error) {
	var c struct {
		Type         json.RawMessage `json:"type"`
		AllowedTools json.RawMessage `json:"allowed_tools"`
	}
	if err := unmarshalExact(choice, &c); err != nil {
		return nil, InvalidRequest("tool_choice", "tool_choice: %v", err).WithCode(CodeInvalidValue)
	}
	const at = "tool_choice.allowed_tools"
	switch jsonKind(c.AllowedTools) {
	case kindObject:
	case kindAbsent, kindNull:
		return nil, InvalidRequest(at, "%s is required: an object with a mode and tools", at).WithCode(CodeMissingParameter)
	default:
		return nil, InvalidRequest(at, "%s must be an object with a mode and tools, got %s", at, jsonKind(c.AllowedTools)).WithCode(CodeInvalidType)
	}
	var a struct {
		Mode  json.RawMessage `json:"mode"`
		Tools json.RawMessage `json:"tools"`
	}
	if err := unmarshalExact(c.AllowedTools, &a); err != nil {
		return nil, InvalidRequest(at, "%s: %v", at, err).WithCode(CodeInvalidValue)
	}
	if _, e := allowedMode(at+".mode", a.Mode); e != nil {
		return nil, e
	}
	tools, e := allowedList(at+".tools", a.Tools)
	if e != nil {
		return nil, e
	}
	var allowed []string
	for i, raw := range tools {
		tat := fmt.Sprintf("%s.tools[%d]", at, i)
		var t struct {
			Type     json.RawMessage `json:"type"`
			Function json.RawMessage `json:"function"`
		}
		if jsonKind(raw) != kindObject || unmarshalExact(raw, &t) != nil {
			return nil, InvalidRequest(tat, `%s must be a tool: {"type": "function", "function": {"name": ...}}`, tat).WithCode(CodeInvalidType)
		}
		if e := functionType(tat+".type", t.Type); e != nil {
			return nil, e
		}
		var f struct {
			Name json.RawMessage `json:"name"`
		}
		if jsonKind(t.Function) != kindObject || unmarshalExact(t.Function, &f) != nil {
			return nil, InvalidRequest(tat+".function", "%s.function is required: an object with a name", tat).WithCode(CodeMissingParameter)
		}
		name, e := stringMember(tat+".function.name", f.Name, true)
		if e != nil {
			return nil, e
		}
		if allowed, e = allow(allowed, names, name, tat+".function.name"); e != nil {
			return nil, e
		}
	}
	return allowed, nil
}

// responsesAllowedTools is the Responses API's allowed_tools choice as
// chat's, checked against the request's function tools (names). A listed
// tool of another type (web_search, mcp…) is passed over, as the request's
// tools of those types are (SkippedTools): the fleet cannot run them. So
// a required choice must list a function tool; an auto choice that lists
// none is "auto".
func responsesAllowedTools(choice json.RawMessage, names []string) (json.RawMessage, *Error) {
	var c struct {
		Type  json.RawMessage `json:"type"`
		Mode  json.RawMessage `json:"mode"`
		Tools json.RawMessage `json:"tools"`
	}
	if err := unmarshalExact(choice, &c); err != nil {
		return nil, InvalidRequest("tool_choice", "tool_choice: %v", err).WithCode(CodeInvalidValue)
	}
	mode, e := allowedMode("tool_choice.mode", c.Mode)
	if e != nil {
		return nil, e
	}
	tools, e := allowedList("tool_choice.tools", c.Tools)
	if e != nil {
		return nil, e
	}
	var allowed []string
	for i, raw := range tools {
		at := fmt.Sprintf("tool_choice.tools[%d]", i)
		var t struct {
			Type json.RawMessage `json:"type"`
			Name json.RawMessage `json:"name"`
		}
		if jsonKind(raw) != kindObject || unmarshalExact(raw, &t) != nil {
			return nil, InvalidRequest(at, `%s must be a tool: {"type": "function", "name": ...}`, at).WithCode(CodeInvalidType)
		}
		typ, e := stringMember(at+".type", t.Type, true)
		if e != nil {
			return nil, e
		}
		if typ != "function" {
			continue
		}
		name, e := stringMember(at+".name", t.Name, true)
		if e != nil {
			return nil, e
		}
		if allowed, e = allow(allowed, names, name, at+".name"); e != nil {
			return nil, e
		}
	}
	if len(allowed) == 0 {
		if mode == ToolChoiceRequired {
			return nil, InvalidRequest("tool_choice.tools", "tool_choice.tools lists no function tool, and only function tools are run (the others are left out), so no call can be required").WithCode(CodeInvalidValue)
		}
		return json.RawMessage(`"auto"`), nil
	}
	return chatAllowedTools(mode, allowed), nil
}

// chatAllowedTools is chat's allowed_tools choice of mode over the
// functions named.
func chatAllowedTools(mode string, names []string) json.RawMessage {
	type function struct {
		Name string `json:"name"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	tools := make([]tool, len(names))
	for i, n := range names {
		tools[i] = tool{"function", function{n}}
	}
	b, _ := json.Marshal(map[string]any{"type": toolChoiceAllowedTools, "allowed_tools": map[string]any{"mode": mode, "tools": tools}})
	return b
}

// allowedMode reads an allowed_tools choice's mode: "auto" or "required".
func allowedMode(param string, raw json.RawMessage) (string, *Error) {
	mode, e := stringMember(param, raw, true)
	if e != nil {
		return "", e
	}
	if mode != ToolChoiceAuto && mode != ToolChoiceRequired {
		return "", InvalidRequest(param, `%s must be "auto" or "required", got %q`, param, mode).WithCode(CodeInvalidValue)
	}
	return mode, nil
}

// allowedList reads an allowed_tools choice's tools: a non-empty array.
func allowedList(param string, raw json.RawMessage) ([]json.RawMessage, *Error) {
	switch jsonKind(raw) {
	case kindArray:
	case kindAbsent, kindNull:
		return nil, InvalidRequest(param, "%s is required: an array of the tools the model may call", param).WithCode(CodeMissingParameter)
	default:
		return nil, InvalidRequest(param, "%s must be an array of tools, got %s", param, jsonKind(raw)).WithCode(CodeInvalidType)
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, InvalidRequest(param, "%s: %v", param, err).WithCode(CodeInvalidType)
	}
	if len(tools) == 0 {
		return nil, InvalidRequest(param, "%s must not be empty: it lists the tools the model may call", param).WithCode(CodeEmptyArray)
	}
	return tools, nil
}

// allow adds name, which param names, to allowed once; a name that is not
// among the request's function tools is a 400.
func allow(allowed, names []string, name, param string) ([]string, *Error) {
	if !slices.Contains(names, name) {
		return nil, InvalidRequest(param, "%s names function %q, which is not among the request's function tools", param, name).WithCode(CodeInvalidValue)
	}
	if slices.Contains(allowed, name) {
		return allowed, nil
	}
	return append(allowed, name), nil
}
