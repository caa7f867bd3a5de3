package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A request's mcp tools read as OpenAI's API takes them: allowed_tools a
// list or a filter, require_approval "always" (also when absent),
// "never" or filters; bad ones are 400s that name the parameter.
func TestMCPTools(t *testing.T) {
	tools := func(ts ...string) *ResponsesRequest {
		r := &ResponsesRequest{}
		for _, s := range ts {
			r.Tools = append(r.Tools, json.RawMessage(s))
		}
		return r
	}
	weather := MCPToolInfo{Name: "get_weather", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
	write := MCPToolInfo{Name: "write"}
	got, e := tools(`{"type":"function","name":"f"}`,
		`{"type":"mcp","server_label":"a","server_url":"https://x/mcp","headers":{"X-Key":"k"},"authorization":"tok","allowed_tools":["get_weather"]}`,
		`{"type":"mcp","server_label":"b","require_approval":"never","allowed_tools":{"read_only":true}}`,
		`{"type":"mcp","server_label":"c","require_approval":{"never":{"tool_names":["get_weather"]}}}`,
		`{"type":"mcp","server_label":"d","require_approval":{"always":{"tool_names":["write"]},"never":{"read_only":false}}}`).MCPTools()
	if e != nil || len(got) != 4 {
		t.Fatalf("%+v %v", got, e)
	}
	a := got[0]
	if a.At != "tools[1]" || a.ServerURL != "https://x/mcp" || a.Headers["X-Key"] != "k" || a.Authorization != "tok" {
		t.Errorf("a: %+v", a)
	}
	for _, tc := range []struct {
		tool             MCPTool
		info             MCPToolInfo
		offers, approval bool
	}{
		{got[0], weather, true, true}, {got[0], write, false, true},
		{got[1], weather, true, false}, {got[1], write, false, false},
		{got[2], weather, true, false}, {got[2], write, true, true},
		{got[3], weather, true, true}, {got[3], write, true, true}, {got[3], MCPToolInfo{Name: "other"}, true, false},
	} {
		if tc.tool.Offers(tc.info) != tc.offers || tc.tool.NeedsApproval(tc.info) != tc.approval {
			t.Errorf("%s, %s: offers %v, approval %v; want %v, %v", tc.tool.ServerLabel, tc.info.Name,
				tc.tool.Offers(tc.info), tc.tool.NeedsApproval(tc.info), tc.offers, tc.approval)
		}
	}
	for _, tc := range []struct{ tool, param string }{
		{`{"type":"mcp"}`, "tools[0].server_label"},
		{`{"type":"mcp","server_label":""}`, "tools[0].server_label"},
		{`{"type":"mcp","server_label":"a","connector_id":"connector_gmail"}`, "tools[0]"},
		{`{"type":"mcp","server_label":"a","server_url":7}`, "tools[0].server_url"},
		{`{"type":"mcp","server_label":"a","headers":{"X":1}}`, "tools[0].headers.X"},
		{`{"type":"mcp","server_label":"a","allowed_tools":"all"}`, "tools[0].allowed_tools"},
		{`{"type":"mcp","server_label":"a","require_approval":"sometimes"}`, "tools[0].require_approval"},
		{`{"type":"mcp","server_label":"a","require_approval":{"never":["x"]}}`, "tools[0].require_approval.never"},
	} {
		if _, e := tools(tc.tool).MCPTools(); e == nil || deref(e.Param) != tc.param {
			t.Errorf("%s: %v, want an error of %s", tc.tool, e, tc.param)
		}
	}
	if _, e := tools(`{"type":"mcp","server_label":"a"}`, `{"type":"mcp","server_label":"a"}`).MCPTools(); e == nil || deref(e.Param) != "tools[1].server_label" {
		t.Errorf("a label twice: %v", e)
	}
}

// The MCP items go out in OpenAI's shapes (null where an item has no
// value), come back as a client sends them (input items, the ids kept),
// and become the chat turns the model reads: a call and its result, a
// denied approval and the denial; a list, a pending request and an
// approval (run as an mcp_call) are no turn.
func TestMCPItems(t *testing.T) {
	call := NewMCPCall("mcp_1", "wx", "get_weather", `{"city":"Paris"}`, "")
	b, _ := json.Marshal(call)
	if want := `{"type":"mcp_call","id":"mcp_1","server_label":"wx","name":"get_weather","arguments":"{\"city\":\"Paris\"}","output":null,"error":null,"approval_request_id":null,"status":"in_progress"}`; string(b) != want {
		t.Errorf("in progress: %s", b)
	}
	call.Output, call.Status = "Sunny", ResponseCompleted
	list := ResponseMessage{ID: "mcpl_1", Type: ItemMCPListTools, ServerLabel: "wx", Tools: []MCPToolInfo{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	req := ResponseMessage{ID: "mcpr_1", Type: ItemMCPApprovalRequest, ServerLabel: "wx", Name: "get_weather", Arguments: `{"city":"Lyon"}`}
	input, _ := json.Marshal([]any{map[string]any{"role": "user", "content": "weather?"}, list, call, req,
		map[string]any{"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": false, "reason": "no"}})
	r := &ResponsesRequest{Model: "m", Input: input}
	items, e := r.Items()
	if e != nil || len(items) != 5 {
		t.Fatalf("%+v %v", items, e)
	}
	for i, want := range []ResponseMessage{list, call, req} {
		gotTools, _ := json.Marshal(items[i+1].Tools)
		wantTools, _ := json.Marshal(want.Tools)
		if got := items[i+1]; got.ID != want.ID || got.Type != want.Type || got.Name != want.Name || got.Arguments != want.Arguments ||
			got.Output != want.Output || string(gotTools) != string(wantTools) {
			t.Errorf("item %d: %+v, want %+v", i+1, got, want)
		}
	}
	if a := items[4]; a.ApprovalRequestID != "mcpr_1" || a.Approve || a.Reason != "no" || !strings.HasPrefix(a.ID, "mcpa_") {
		t.Errorf("approval response: %+v", a)
	}
	creq, e := r.Chat(nil, items)
	if e != nil {
		t.Fatal(e)
	}
	var msgs []map[string]any
	for _, m := range creq.Messages {
		var v map[string]any
		_ = json.Unmarshal(m, &v)
		msgs = append(msgs, v)
	}
	roles := []string{}
	for _, m := range msgs {
		roles = append(roles, m["role"].(string))
	}
	// The call and the denied one are calls of one assistant turn (the
	// model's round), their results after it.
	if want := []string{"user", "assistant", "tool", "tool"}; !reflect.DeepEqual(roles, want) || len(msgs[1]["tool_calls"].([]any)) != 2 ||
		msgs[2]["content"] != "Sunny" || msgs[3]["content"] != "the call was not approved: no" || msgs[3]["tool_call_id"] != "mcpr_1" {
		t.Errorf("chat: %v", msgs)
	}
	for _, bad := range []string{`{"type":"mcp_approval_response","approval_request_id":"x"}`, `{"type":"mcp_call","id":"x","server_label":"a","name":"n"}`,
		`{"type":"mcp_list_tools","id":"x","server_label":"a","tools":{}}`} {
		r := &ResponsesRequest{Input: json.RawMessage("[" + bad + "]")}
		if _, e := r.Items(); e == nil || !strings.HasPrefix(deref(e.Param), "input[0].") {
			t.Errorf("%s: %v", bad, e)
		}
	}
}

// A response echoes and stores its tools without an mcp tool's headers
// and authorization; other tools are as sent.
func TestRedactedTools(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","name":"f"}`),
		json.RawMessage(`{"type":"mcp","server_label":"a","headers":{"Authorization":"Bearer s3cret"},"authorization":"t0ken"}`)}
	got := RedactedTools(tools)
	if string(got[0]) != string(tools[0]) || strings.Contains(string(got[1]), "s3cret") || strings.Contains(string(got[1]), "t0ken") ||
		!strings.Contains(string(got[1]), `"server_label":"a"`) || !strings.Contains(string(tools[1]), "s3cret") {
		t.Errorf("%s", got)
	}
}

// Any Responses request with mcp tools and MCP items reads as one, or is
// a 400 naming a parameter; its items go out and come back in as the
// same items.
func FuzzResponsesMCP(f *testing.F) {
	for _, s := range []string{
		`{"input":[{"role":"user","content":"hi"},{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}],"tools":[{"type":"mcp","server_label":"a","server_url":"https://x/mcp","require_approval":{"never":{"tool_names":["f"]}}}]}`,
		`{"input":[{"type":"mcp_list_tools","id":"l","server_label":"a","tools":[{"name":"f","input_schema":{}}]},{"type":"mcp_call","id":"c","server_label":"a","name":"f","arguments":"{}","error":{"type":"http_error","code":504}}],"tools":[{"type":"mcp","server_label":"a","allowed_tools":["f"]}]}`,
		`{"input":[{"type":"mcp_approval_request","id":"r","server_label":"a","name":"f","arguments":"{}"},{"type":"mcp_approval_response","approval_request_id":"r","approve":false,"reason":"no"}]}`,
		`{"tools":[{"type":"mcp"}]}`, `{"input":[{"type":"mcp_call"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ResponsesRequest
		if json.Unmarshal(body, &r) != nil {
			return
		}
		if _, e := r.MCPTools(); e != nil && (e.Param == nil || e.Status != 400) {
			t.Fatalf("tools: %+v", e)
		}
		items, e := r.Items()
		if e != nil {
			if e.Param == nil || e.Status != 400 {
				t.Fatalf("items: %+v", e)
			}
			return
		}
		out, err := json.Marshal(items)
		if err != nil {
			t.Fatal(err)
		}
		back := ResponsesRequest{Input: out}
		again, e := back.Items()
		if e != nil || len(again) != len(items) {
			t.Fatalf("%s back in: %d items, %v", out, len(again), e)
		}
		_, _ = r.Chat(nil, items)
	})
}
