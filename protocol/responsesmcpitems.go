package protocol

import "encoding/json"

// The MCP items on the wire: as a response writes them (marshalMCP), and
// as a client sends them back in an input (mcpInputItem).

// marshalMCP writes an MCP item with the members of its type, null where
// it has none (an mcp_call's output until it has one, its error, …).
func (m ResponseMessage) marshalMCP() ([]byte, error) {
	orNull := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	switch m.Type {
	case ItemMCPListTools:
		tools := m.Tools
		if tools == nil {
			tools = []MCPToolInfo{}
		}
		return json.Marshal(struct {
			Type        string          `json:"type"`
			ID          string          `json:"id"`
			ServerLabel string          `json:"server_label"`
			Tools       []MCPToolInfo   `json:"tools"`
			Error       json.RawMessage `json:"error"`
		}{m.Type, m.ID, m.ServerLabel, tools, m.Error})
	case ItemMCPCall:
		var output *string
		if m.Status != ResponseInProgress && !present(m.Error) {
			output = &m.Output
		}
		return json.Marshal(struct {
			Type              string          `json:"type"`
			ID                string          `json:"id"`
			ServerLabel       string          `json:"server_label"`
			Name              string          `json:"name"`
			Arguments         string          `json:"arguments"`
			Output            *string         `json:"output"`
			Error             json.RawMessage `json:"error"`
			ApprovalRequestID *string         `json:"approval_request_id"`
			Status            string          `json:"status"`
		}{m.Type, m.ID, m.ServerLabel, m.Name, m.Arguments, output, m.Error, orNull(m.ApprovalRequestID), m.Status})
	case ItemMCPApprovalRequest:
		return json.Marshal(struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			ServerLabel string `json:"server_label"`
			Name        string `json:"name"`
			Arguments   string `json:"arguments"`
		}{m.Type, m.ID, m.ServerLabel, m.Name, m.Arguments})
	}
	return json.Marshal(struct {
		Type              string  `json:"type"`
		ID                string  `json:"id"`
		ApprovalRequestID string  `json:"approval_request_id"`
		Approve           bool    `json:"approve"`
		Reason            *string `json:"reason"`
	}{m.Type, m.ID, m.ApprovalRequestID, m.Approve, orNull(m.Reason)})
}

// mcpInputItem reads an MCP item of an input (at its parameter at): one
// a client sends back as a response had it (mcp_list_tools, mcp_call,
// mcp_approval_request: their ids kept, which approvals and calls refer
// to), or its answer to an approval request (mcp_approval_response).
func mcpInputItem(at, typ string, raw json.RawMessage) (ResponseMessage, *Error) {
	var it struct {
		ID                json.RawMessage `json:"id"`
		ServerLabel       json.RawMessage `json:"server_label"`
		Name              json.RawMessage `json:"name"`
		Arguments         json.RawMessage `json:"arguments"`
		Output            json.RawMessage `json:"output"`
		Error             json.RawMessage `json:"error"`
		Tools             json.RawMessage `json:"tools"`
		ApprovalRequestID json.RawMessage `json:"approval_request_id"`
		Approve           json.RawMessage `json:"approve"`
		Reason            json.RawMessage `json:"reason"`
	}
	_ = json.Unmarshal(raw, &it) // an object: inputItem checked it
	m := ResponseMessage{Type: typ, Status: ResponseCompleted}
	var e *Error
	str := func(dst *string, member string, v json.RawMessage, required bool) {
		if e == nil {
			*dst, e = stringMember(at+"."+member, v, required)
		}
	}
	str(&m.ID, "id", it.ID, typ != ItemMCPApprovalResponse)
	switch typ {
	case ItemMCPApprovalResponse:
		str(&m.ApprovalRequestID, "approval_request_id", it.ApprovalRequestID, true)
		str(&m.Reason, "reason", it.Reason, false)
		if e == nil && jsonKind(it.Approve) != kindBool {
			e = InvalidRequest(at+".approve", "%s.approve is required: true or false", at).WithCode(CodeMissingParameter)
		}
		_ = json.Unmarshal(it.Approve, &m.Approve)
		if m.ID == "" {
			m.ID = NewID("mcpa_")
		}
		return m, e
	case ItemMCPListTools:
		str(&m.ServerLabel, "server_label", it.ServerLabel, true)
		if e == nil && (jsonKind(it.Tools) != kindArray || json.Unmarshal(it.Tools, &m.Tools) != nil) {
			e = InvalidRequest(at+".tools", "%s.tools must be a list of tools, each {\"name\", \"input_schema\", …}", at).WithCode(CodeInvalidType)
		}
		if present(it.Error) {
			m.Error = it.Error
		}
		return m, e
	}
	str(&m.ServerLabel, "server_label", it.ServerLabel, true)
	str(&m.Name, "name", it.Name, true)
	str(&m.Arguments, "arguments", it.Arguments, true)
	if typ == ItemMCPCall {
		str(&m.Output, "output", it.Output, false)
		str(&m.ApprovalRequestID, "approval_request_id", it.ApprovalRequestID, false)
		if present(it.Error) {
			m.Error, m.Status = it.Error, ResponseFailed
		}
	}
	return m, e
}
