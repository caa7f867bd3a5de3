package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Hosted MCP tools of the Responses API ({"type": "mcp", …}), which the
// router runs itself where its configuration allows the tool's server
// (router/mcp*.go): the tool as a request gives it (MCPTool, read by
// ResponsesRequest.MCPTools), the items a response has of it
// (mcp_list_tools, mcp_call, mcp_approval_request) and the client's
// answer to an approval request (mcp_approval_response, an input item),
// their stream events, and how each becomes chat turns (Chat). Without
// such a configuration mcp tools are left out, as the other tools the
// fleet cannot run.

// Types of the MCP items.
const (
	ItemMCPListTools        = "mcp_list_tools"
	ItemMCPCall             = "mcp_call"
	ItemMCPApprovalRequest  = "mcp_approval_request"
	ItemMCPApprovalResponse = "mcp_approval_response"
)

// isMCPItem reports whether typ is an MCP item's type.
func isMCPItem(typ string) bool {
	return typ == ItemMCPListTools || typ == ItemMCPCall || typ == ItemMCPApprovalRequest || typ == ItemMCPApprovalResponse
}

// Event types of the MCP items in a stream, beside their
// response.output_item.added and .done.
const (
	EventMCPListToolsInProgress = "response.mcp_list_tools.in_progress"
	EventMCPListToolsCompleted  = "response.mcp_list_tools.completed"
	EventMCPListToolsFailed     = "response.mcp_list_tools.failed"
	EventMCPCallInProgress      = "response.mcp_call.in_progress"
	EventMCPArgumentsDelta      = "response.mcp_call_arguments.delta"
	EventMCPArgumentsDone       = "response.mcp_call_arguments.done"
	EventMCPCallCompleted       = "response.mcp_call.completed"
	EventMCPCallFailed          = "response.mcp_call.failed"
)

// ResponseMCPEvent is an MCP item's progress: a list of tools or a call in
// progress, completed or failed. (Its arguments go in
// ResponseArgumentsEvents.)
type ResponseMCPEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
}

// MCPToolInfo is a tool of an MCP server, as an mcp_list_tools item lists
// it.
type MCPToolInfo struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Annotations json.RawMessage `json:"annotations"`
}

// ReadOnly reports whether the tool says it only reads (its annotations'
// readOnlyHint), what read_only filters match.
func (t MCPToolInfo) ReadOnly() bool {
	var a struct {
		ReadOnly bool `json:"readOnlyHint"`
	}
	_ = json.Unmarshal(t.Annotations, &a)
	return a.ReadOnly
}

// MCPTool is a request's MCP tool: a server, and which of its tools the
// model is offered and which need the client's approval before a call.
type MCPTool struct {
	At            string // its parameter: tools[i]
	ServerLabel   string
	ServerURL     string // "": the server the configuration names ServerLabel
	Authorization string // an OAuth token, sent as a bearer
	Headers       map[string]string
	// Allowed are the tools offered; nil: all.
	Allowed *MCPToolFilter
	// Always and Never say which tools need approval (require_approval):
	// one matched by Always does, one matched by Never alone does not,
	// any other does.
	Always, Never *MCPToolFilter
}

// Offers reports whether the tool offers t to the model.
func (m MCPTool) Offers(t MCPToolInfo) bool { return m.Allowed == nil || m.Allowed.Matches(t) }

// NeedsApproval reports whether a call of t waits for the client's
// approval.
func (m MCPTool) NeedsApproval(t MCPToolInfo) bool {
	return m.Always.Matches(t) || !m.Never.Matches(t)
}

// MCPToolFilter matches a server's tools: by name (none listed: any) and
// by read_only (unset: any). A nil filter matches none.
type MCPToolFilter struct {
	Names    []string
	ReadOnly *bool
}

// Matches reports whether f matches t.
func (f *MCPToolFilter) Matches(t MCPToolInfo) bool {
	return f != nil && (len(f.Names) == 0 || slices.Contains(f.Names, t.Name)) && (f.ReadOnly == nil || *f.ReadOnly == t.ReadOnly())
}

// MCPTools reads the request's mcp tools, checking each: a server_label
// (unique), a server_url or none (the configured server of that label),
// no connector_id or tunnel_id, headers of strings, allowed_tools and
// require_approval as OpenAI's API takes them (require_approval absent
// is "always", as OpenAI's).
func (r *ResponsesRequest) MCPTools() ([]MCPTool, *Error) {
	var out []MCPTool
	for i, raw := range r.Tools {
		var t struct {
			Type            string                     `json:"type"`
			ServerLabel     json.RawMessage            `json:"server_label"`
			ServerURL       json.RawMessage            `json:"server_url"`
			ConnectorID     json.RawMessage            `json:"connector_id"`
			TunnelID        json.RawMessage            `json:"tunnel_id"`
			Authorization   json.RawMessage            `json:"authorization"`
			Headers         map[string]json.RawMessage `json:"headers"`
			AllowedTools    json.RawMessage            `json:"allowed_tools"`
			RequireApproval json.RawMessage            `json:"require_approval"`
		}
		at := fmt.Sprintf("tools[%d]", i)
		if jsonKind(raw) != kindObject || json.Unmarshal(raw, &t) != nil || t.Type != "mcp" {
			continue // another tool, or not one: chatTools says so
		}
		if present(t.ConnectorID) || present(t.TunnelID) {
			return nil, InvalidRequest(at, "%s: connectors and tunnels are not supported by this server: give a server_url", at).WithCode(CodeUnsupportedValue)
		}
		m := MCPTool{At: at}
		var e *Error
		if m.ServerLabel, e = stringMember(at+".server_label", t.ServerLabel, true); e != nil {
			return nil, e
		}
		if m.ServerLabel == "" || slices.ContainsFunc(out, func(o MCPTool) bool { return o.ServerLabel == m.ServerLabel }) {
			return nil, InvalidRequest(at+".server_label", "%s.server_label must be a label no other mcp tool of the request has", at).WithCode(CodeInvalidValue)
		}
		if m.ServerURL, e = stringMember(at+".server_url", t.ServerURL, false); e != nil {
			return nil, e
		}
		if m.Authorization, e = stringMember(at+".authorization", t.Authorization, false); e != nil {
			return nil, e
		}
		if m.Headers, e = mcpHeaders(at+".headers", t.Headers); e != nil {
			return nil, e
		}
		if m.Allowed, e = mcpFilter(at+".allowed_tools", t.AllowedTools, true); e != nil {
			return nil, e
		}
		if e = m.readApproval(at+".require_approval", t.RequireApproval); e != nil {
			return nil, e
		}
		out = append(out, m)
	}
	return out, nil
}

// mcpHeaders reads a tool's headers: strings.
func mcpHeaders(at string, raw map[string]json.RawMessage) (map[string]string, *Error) {
	out := map[string]string{}
	for k, v := range raw {
		s, e := stringMember(at+"."+k, v, false)
		if e != nil {
			return nil, e
		}
		out[k] = s
	}
	return out, nil
}

// mcpFilter reads a filter: {"tool_names": […], "read_only": bool}, or,
// with names, a list of tool names; absent or null is nil.
func mcpFilter(at string, raw json.RawMessage, names bool) (*MCPToolFilter, *Error) {
	switch k := jsonKind(raw); {
	case k == kindAbsent || k == kindNull:
		return nil, nil
	case k == kindArray && names:
		var f MCPToolFilter
		if json.Unmarshal(raw, &f.Names) != nil {
			return nil, InvalidRequest(at, "%s must be a list of tool names", at).WithCode(CodeInvalidType)
		}
		return &f, nil
	case k != kindObject:
		return nil, InvalidRequest(at, "%s must be an object {\"tool_names\": [...], \"read_only\": ...}", at).WithCode(CodeInvalidType)
	}
	var f struct {
		Names    []string `json:"tool_names"`
		ReadOnly *bool    `json:"read_only"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return nil, InvalidRequest(at, "%s must be an object {\"tool_names\": [tool names], \"read_only\": true|false}", at).WithCode(CodeInvalidType)
	}
	return &MCPToolFilter{Names: f.Names, ReadOnly: f.ReadOnly}, nil
}

// readApproval reads require_approval: "always" (the default), "never",
// or {"always": filter, "never": filter}.
func (m *MCPTool) readApproval(at string, raw json.RawMessage) *Error {
	switch jsonKind(raw) {
	case kindAbsent, kindNull:
		m.Always = &MCPToolFilter{}
		return nil
	case kindString:
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "always":
			m.Always = &MCPToolFilter{}
		case "never":
			m.Never = &MCPToolFilter{}
		default:
			return InvalidRequest(at, `%s must be "always", "never" or a filter object, got %q`, at, s).WithCode(CodeInvalidValue)
		}
		return nil
	case kindObject:
	default:
		return InvalidRequest(at, `%s must be "always", "never" or a filter object`, at).WithCode(CodeInvalidType)
	}
	var f struct {
		Always json.RawMessage `json:"always"`
		Never  json.RawMessage `json:"never"`
	}
	_ = json.Unmarshal(raw, &f)
	var e *Error
	if m.Always, e = mcpFilter(at+".always", f.Always, false); e != nil {
		return e
	}
	m.Never, e = mcpFilter(at+".never", f.Never, false)
	return e
}

// RedactedTools are tools as a response echoes and stores them: an mcp
// tool's headers and authorization (credentials) left out.
func RedactedTools(tools []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for i, raw := range tools {
		var t map[string]json.RawMessage
		if json.Unmarshal(raw, &t) != nil || string(t["type"]) != `"mcp"` || !present(t["headers"]) && !present(t["authorization"]) {
			continue
		}
		if out == nil {
			out = slices.Clone(tools)
		}
		delete(t, "headers")
		delete(t, "authorization")
		out[i], _ = json.Marshal(t)
	}
	if out == nil {
		return tools
	}
	return out
}

// HostedFunction is a function of a hosted tool (an MCP server's tool,
// which the router runs), offered to the model beside the request's
// function tools.
type HostedFunction struct {
	At          string // the request's tool that offers it (tools[i])
	Name        string
	Description *string
	Parameters  json.RawMessage
}

// addHosted offers creq the hosted functions, when the router hosts the
// request's mcp tools (no longer skipped, then); names are the function
// tools', which a hosted function's name may not repeat.
func (r *ResponsesRequest) addHosted(creq *ChatCompletionRequest, names []string) *Error {
	if !r.HostsMCP {
		return nil
	}
	creq.SkippedTools = slices.DeleteFunc(creq.SkippedTools, func(s string) bool { return s == "mcp" })
	for _, f := range r.Hosted {
		if hasName(names, f.Name) {
			return InvalidRequest(f.At, "%s: its server's tool %q has the name of another tool of the request: leave one out (allowed_tools)", f.At, f.Name).WithCode(CodeInvalidValue)
		}
		params := f.Parameters
		if jsonKind(params) != kindObject {
			params = nil
		}
		creq.Tools = append(creq.Tools, chatTool(f.Name, f.Description, params))
		creq.ToolSchemaParams = append(creq.ToolSchemaParams, f.At)
		names = append(names, f.Name)
	}
	return nil
}

// NewMCPCall is an mcp_call item: server's tool name called with
// arguments (a JSON object's text), in progress until it has an output
// or an error.
func NewMCPCall(id, server, name, arguments, approvalRequestID string) ResponseMessage {
	return ResponseMessage{ID: id, Type: ItemMCPCall, ServerLabel: server, Name: name, Arguments: arguments, ApprovalRequestID: approvalRequestID, Status: ResponseInProgress}
}

// MCPToolExecutionError is an mcp_call's error when the tool said it
// failed (its result's isError): text is what it said.
func MCPToolExecutionError(text string) json.RawMessage {
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Content []part `json:"content"`
	}{"mcp_tool_execution_error", []part{{"text", text}}})
	return b
}

// MCPError is an mcp_call's error of the call's transport (typ
// http_error, code an HTTP status) or of MCP (mcp_protocol_error, code
// JSON-RPC's).
func MCPError(typ string, code int, message string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{typ, code, message})
	return b
}

// mcpResultText is what the model reads of an mcp_call's result: its
// output, or its error's message (a tool's error, its text).
func (m ResponseMessage) mcpResultText() string {
	if !present(m.Error) {
		return m.Output
	}
	var e struct {
		Message string `json:"message"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(m.Error, &e) != nil {
		var s string
		_ = json.Unmarshal(m.Error, &s)
		return "error: " + s
	}
	if e.Message == "" {
		var texts []string
		for _, c := range e.Content {
			texts = append(texts, c.Text)
		}
		e.Message = strings.Join(texts, "\n")
	}
	return "error: " + e.Message
}

// mcpTurn is how an MCP item of the conversation all reads in a chat: an
// mcp_call is the assistant's call and its result; a denied approval
// response is the call it denied and the denial; the others (lists of
// tools, approval requests, approvals, run as mcp_calls) are no turn.
func mcpTurn(m ResponseMessage, all []ResponseMessage) (call ToolCall, result json.RawMessage, ok bool) {
	switch {
	case m.Type == ItemMCPCall:
		return chatToolCall(m.ID, m.Name, json.RawMessage(m.Arguments)), toolMessage(m.ID, m.mcpResultText()), true
	case m.Type == ItemMCPApprovalResponse && !m.Approve:
		i := slices.IndexFunc(all, func(r ResponseMessage) bool { return r.Type == ItemMCPApprovalRequest && r.ID == m.ApprovalRequestID })
		if i < 0 {
			return ToolCall{}, nil, false
		}
		denied := "the call was not approved"
		if m.Reason != "" {
			denied += ": " + m.Reason
		}
		r := all[i]
		return chatToolCall(r.ID, r.Name, json.RawMessage(r.Arguments)), toolMessage(r.ID, denied), true
	}
	return ToolCall{}, nil, false
}
