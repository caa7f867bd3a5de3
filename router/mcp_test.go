package router

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mcptest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
	"github.com/caddy-mlc/caddy-mlc/router/mcpclient"
)

// mcpReplies script the model of the hosted-MCP tests: a question calls
// a tool of the test MCP server, the tool's answer in the prompt gets
// the final text.
var mcpReplies = []struct{ match, reply string }{
	{"", "ok"},
	{"weather in Paris", hermes("get_weather", `{"city": "Paris"}`)},
	{fmt.Sprintf(mcptest.WeatherOf, "Paris"), "It is sunny in Paris."},
	{"not approved", "I could not check."},
	{"slow tool please", hermes("slow", `{}`)},
	{"did not answer", "The tool timed out."},
	{"a big answer please", hermes("big", `{"bytes": 5000}`)},
	{"output truncated", "The answer was long."},
	{"loop forever", hermes("echo", `{"text": "loop forever"}`)},
	{"fail please", hermes("fail", `{}`)},
	{mcptest.Failed, "The service is down."},
}

func hermes(name, args string) string {
	return `<tool_call>{"name": "` + name + `", "arguments": ` + args + `}</tool_call>`
}

// startMCPCore starts a core whose engines answer mcpReplies; the tenant
// "tight" has a budget of one request a minute.
func startMCPCore(t *testing.T) *core {
	t.Helper()
	budgets, err := budget.New(budget.Options{Rules: []budget.Rule{{Tenant: "tight", RequestsPerMinute: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var replies []map[string]string
	for _, r := range mcpReplies {
		replies = append(replies, map[string]string{"match": r.match, "reply": r.reply})
	}
	file := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(file, []byte(mustMarshal(t, replies)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startCoreArgs(t, 2, Config{Mode: ModeDisagg}, nil, "--replies", file)
	c.r.gate.budgets = budgets // before any request
	return c
}

// mcpFront serves c behind a front that stores responses and hosts MCP
// tools on the servers cfg allows, at most rounds rounds an answer; it
// returns its URL.
func (c *core) mcpFront(t *testing.T, cfg mcpclient.Config, rounds int) string {
	t.Helper()
	m := c.mcpModels(t, cfg, rounds)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		m.ServeHTTP(w, req.WithContext(WithFacts(req.Context(), Facts{Tenant: req.Header.Get("X-Tenant")})))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// mcpModels is the front of mcpFront.
func (c *core) mcpModels(t *testing.T, cfg mcpclient.Config, rounds int) *Models {
	t.Helper()
	hosts, err := mcpclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hosts.Close)
	m := NewModels([]*Router{c.r}, 0)
	m.StoreResponses(&memStore{}, 0)
	m.HostMCP(hosts, rounds)
	return m
}

// mcpTool is a request's mcp tool.
func mcpTool(label, url, approval string, extra ...any) map[string]any {
	t := map[string]any{"type": "mcp", "server_label": label, "server_url": url}
	if approval != "" {
		t["require_approval"] = approval
	}
	for i := 0; i+1 < len(extra); i += 2 {
		t[extra[i].(string)] = extra[i+1]
	}
	return t
}

// shape is what a test compares of an output item.
type shape struct {
	Type, Status, Name, Arguments, Output, Text string
	Error                                       string // the error's type
	Tools                                       []string
	Approval                                    bool // names an approval request
}

func shapes(items []protocol.ResponseMessage) []shape {
	var out []shape
	for _, m := range items {
		s := shape{Type: m.Type, Status: m.Status, Name: m.Name, Arguments: m.Arguments, Output: m.Output, Text: m.Text(), Approval: m.ApprovalRequestID != ""}
		if m.Type == protocol.ItemMCPApprovalRequest {
			s.Status = ""
		}
		var e struct{ Type string }
		if json.Unmarshal(m.Error, &e) == nil {
			s.Error = e.Type
		}
		for _, t := range m.Tools {
			s.Tools = append(s.Tools, t.Name)
		}
		out = append(out, s)
	}
	return out
}

// postResponse posts body to front's /v1/responses and decodes the whole
// response, failing t on another answer.
func postResponse(t *testing.T, front string, body map[string]any) protocol.Response {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, front+protocol.PathResponses, body)
	var r protocol.Response
	if status != http.StatusOK || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("%d %s", status, raw)
	}
	return r
}

// postStreamed posts body to front's /v1/responses, streamed, and reads
// the stream: its events' names (each run of one name once), checked
// numbered from 0, and the response of its last event.
func postStreamed(t *testing.T, front string, body map[string]any) ([]string, protocol.Response) {
	t.Helper()
	body["stream"] = true
	defer delete(body, "stream")
	status, raw := callJSON(t, http.MethodPost, front+protocol.PathResponses, body)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	var names []string
	var last protocol.ResponseStateEvent
	for i, e := range namedEvents(t, raw) {
		var typed struct {
			Type           string
			SequenceNumber *int `json:"sequence_number"`
		}
		if json.Unmarshal(e.data, &typed) != nil || typed.Type != e.name || typed.SequenceNumber == nil || *typed.SequenceNumber != i {
			t.Fatalf("event %d %q: %s", i, e.name, e.data)
		}
		if n := len(names); n == 0 || names[n-1] != e.name {
			names = append(names, e.name)
		}
		_ = json.Unmarshal(e.data, &last)
	}
	return names, last.Response
}

var weatherTools = []string{"big", "echo", "fail", "get_weather", "slow"}

// A hosted MCP tool, whole and streamed: the server's tools listed, the
// model's call run on the server (with the request's headers and the
// configured server's, the ones of another tool not), its output fed
// back on the same engines for the final text, the usage of both rounds;
// the stream's events in OpenAI's order. Continued by
// previous_response_id, the conversation's list is reused (no listing
// again); the response echoes the tools without their headers.
func TestMCPToolRuns(t *testing.T) {
	c := startMCPCore(t)
	srv := mcptest.Start(t)
	front := c.mcpFront(t, mcpclient.Config{Servers: []mcpclient.Server{{Name: "weather", URL: srv.URL, Headers: map[string]string{"X-Configured": "yes"}}}}, 0)
	tool := mcpTool("wx", "weather", "never", "headers", map[string]string{"X-Api-Key": "secret-1"})
	body := map[string]any{"model": "tiny", "input": "What is the weather in Paris?", "tools": []any{tool}, "max_output_tokens": 256}

	want := []shape{
		{Type: protocol.ItemMCPListTools, Tools: weatherTools},
		{Type: protocol.ItemMCPCall, Status: protocol.ResponseCompleted, Name: "get_weather", Arguments: `{"city":"Paris"}`, Output: "Sunny, 22 degrees in Paris"},
		{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: "It is sunny in Paris."},
	}
	whole := postResponse(t, front, body)
	if got := shapes(whole.Output); !reflect.DeepEqual(got, want) {
		t.Fatalf("whole: %+v\nwant %+v", got, want)
	}
	// Both rounds counted: what the model wrote in each, as a chat
	// completion counts a scripted reply (its end included).
	_, _, chat := chatAnswer(t, c.base, []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}}, 256)
	end := chat.CompletionTokens - len(c.r.dec.tok.Encode(mcpReplies[1].reply))
	out := len(c.r.dec.tok.Encode(mcpReplies[1].reply)) + len(c.r.dec.tok.Encode(mcpReplies[2].reply)) + 2*end
	if u := whole.Usage; u.OutputTokens != out || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("usage %+v: want the %d output tokens of both rounds", u, out)
	}
	if raw, _ := json.Marshal(whole.Tools); strings.Contains(string(raw), "secret-1") || !strings.Contains(string(raw), `"server_label":"wx"`) {
		t.Errorf("tools echoed: %s", raw)
	}
	if got := srv.Header("X-Api-Key"); len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != "secret-1" }) {
		t.Errorf("the server got X-Api-Key %q", got)
	}
	if got := srv.Header("X-Configured"); len(got) != srv.Requests() {
		t.Errorf("the configured header went with %d of %d requests", len(got), srv.Requests())
	}

	names, streamed := postStreamed(t, front, body)
	wantNames := []string{protocol.EventResponseCreated, protocol.EventResponseInProgress,
		protocol.EventOutputItemAdded, protocol.EventMCPListToolsInProgress, protocol.EventMCPListToolsCompleted, protocol.EventOutputItemDone,
		protocol.EventOutputItemAdded, protocol.EventMCPCallInProgress, protocol.EventMCPArgumentsDelta, protocol.EventMCPArgumentsDone,
		protocol.EventMCPCallCompleted, protocol.EventOutputItemDone,
		protocol.EventOutputItemAdded, protocol.EventContentPartAdded, protocol.EventOutputTextDelta, protocol.EventOutputTextDone,
		protocol.EventContentPartDone, protocol.EventOutputItemDone, protocol.EventResponseCompleted}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("events %q\nwant %q", names, wantNames)
	}
	if got := shapes(streamed.Output); !reflect.DeepEqual(got, want) || *streamed.Usage != *whole.Usage {
		t.Errorf("streamed: %+v, usage %+v; whole's usage %+v", got, streamed.Usage, whole.Usage)
	}

	listed := srv.Method("tools/list")
	next := map[string]any{"model": "tiny", "previous_response_id": whole.ID, "input": "And the weather in Paris tomorrow?", "tools": []any{tool}}
	cont := postResponse(t, front, next)
	if got := shapes(cont.Output); len(got) != 2 || got[0].Type != protocol.ItemMCPCall || got[1].Text != "It is sunny in Paris." {
		t.Errorf("continued: %+v", got)
	}
	if calls := srv.Calls(); len(calls) != 3 {
		t.Errorf("the server ran %q, want get_weather thrice", calls)
	}
	if n := srv.Method("tools/list"); n != listed {
		t.Errorf("the tools were listed again: %d lists, %d before", n, listed)
	}

	// Traced: a span per listing and per call, under the request's; the
	// trace goes on to the server.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	m := c.mcpModels(t, mcpclient.Config{Servers: []mcpclient.Server{{Name: "weather", URL: srv.URL}}}, 0)
	handled := make(chan struct{}, 1)
	traced := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tp.Tracer("test").Start(r.Context(), "request")
		defer func() {
			span.End()
			handled <- struct{}{}
		}()
		m.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(traced.Close)
	parents := len(srv.Header("Traceparent"))
	postResponse(t, traced.URL, body)
	select {
	case <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the request's handler did not return")
	}
	var spans []string
	for _, sp := range rec.Ended() {
		if attrs := attribute.NewSet(sp.Attributes()...); strings.HasPrefix(sp.Name(), "mcp.") {
			tool, _ := attrs.Value("mcp.tool")
			label, _ := attrs.Value("mcp.server_label")
			spans = append(spans, sp.Name()+" "+label.AsString()+" "+tool.AsString())
		}
	}
	slices.Sort(spans)
	if want := []string{"mcp.call wx get_weather", "mcp.list_tools wx "}; !reflect.DeepEqual(spans, want) {
		t.Errorf("spans %q, want %q", spans, want)
	}
	if len(srv.Header("Traceparent")) == parents {
		t.Error("no traceparent went to the MCP server")
	}
}

// A tool that needs approval (require_approval absent: always) ends the
// response with an mcp_approval_request, the server not called; the
// client's approval (by previous_response_id, or with the items sent
// back) runs the call first thing in the next response, streamed as
// its first item, and the model answers with its output; a denial is
// no call, and the model reads it. A filter that lets the tool run
// needs no approval; an approval of no request is a 400.
func TestMCPApproval(t *testing.T) {
	c := startMCPCore(t)
	srv := mcptest.Start(t)
	front := c.mcpFront(t, mcpclient.Config{Servers: []mcpclient.Server{{Name: "weather", URL: srv.URL}}}, 0)
	tools := []any{mcpTool("wx", srv.URL, "")}
	q := "What is the weather in Paris?"
	first := postResponse(t, front, map[string]any{"input": q, "tools": tools, "max_output_tokens": 256})
	want := []shape{{Type: protocol.ItemMCPListTools, Tools: weatherTools}, {Type: protocol.ItemMCPApprovalRequest, Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	if got := shapes(first.Output); !reflect.DeepEqual(got, want) || first.Status != protocol.ResponseCompleted || len(srv.Calls()) != 0 {
		t.Fatalf("%s: %+v, the server ran %q", first.Status, got, srv.Calls())
	}
	request := first.Output[1]
	approve := func(yes bool) map[string]any {
		return map[string]any{"type": "mcp_approval_response", "approval_request_id": request.ID, "approve": yes, "reason": "not now"}
	}

	names, approved := postStreamed(t, front, map[string]any{"previous_response_id": first.ID, "input": []any{approve(true)}, "tools": tools})
	want = []shape{{Type: protocol.ItemMCPCall, Status: protocol.ResponseCompleted, Name: "get_weather", Arguments: `{"city":"Paris"}`, Output: "Sunny, 22 degrees in Paris", Approval: true},
		{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: "It is sunny in Paris."}}
	if got := shapes(approved.Output); !reflect.DeepEqual(got, want) || approved.Output[0].ApprovalRequestID != request.ID {
		t.Fatalf("approved: %+v", got)
	}
	wantNames := []string{protocol.EventResponseCreated, protocol.EventResponseInProgress, protocol.EventOutputItemAdded, protocol.EventMCPCallInProgress,
		protocol.EventMCPArgumentsDelta, protocol.EventMCPArgumentsDone, protocol.EventMCPCallCompleted, protocol.EventOutputItemDone, protocol.EventOutputItemAdded}
	if len(names) < len(wantNames) || !reflect.DeepEqual(names[:len(wantNames)], wantNames) {
		t.Errorf("approved, streamed: %q", names)
	}
	// Approved again: the call ran, it is not run twice.
	again := postResponse(t, front, map[string]any{"previous_response_id": approved.ID, "input": []any{approve(true)}, "tools": tools})
	if calls := srv.Calls(); len(calls) != 1 || slices.ContainsFunc(again.Output, func(m protocol.ResponseMessage) bool { return m.Type == protocol.ItemMCPCall }) {
		t.Errorf("approved again: the server ran %q; output %+v", calls, shapes(again.Output))
	}

	denied := postResponse(t, front, map[string]any{"previous_response_id": first.ID, "input": []any{approve(false)}, "tools": tools})
	if got := shapes(denied.Output); len(got) != 1 || got[0].Text != "I could not check." || len(srv.Calls()) != 1 {
		t.Errorf("denied: %+v, the server ran %q", got, srv.Calls())
	}

	// The conversation sent back whole, without previous_response_id:
	// its list of tools is reused.
	lists := srv.Method("tools/list")
	back := []any{map[string]any{"role": "user", "content": q}, first.Output[0], first.Output[1], approve(true)}
	sent := postResponse(t, front, map[string]any{"input": back, "tools": tools, "store": false})
	if got := shapes(sent.Output); len(got) != 2 || got[0].Type != protocol.ItemMCPCall || got[1].Text != "It is sunny in Paris." || srv.Method("tools/list") != lists {
		t.Errorf("sent back: %+v (%d lists, %d before)", got, srv.Method("tools/list"), lists)
	}

	readOnly := []any{mcpTool("wx", srv.URL, "", "require_approval", map[string]any{"never": map[string]any{"read_only": true}})}
	free := postResponse(t, front, map[string]any{"input": q, "tools": readOnly, "max_output_tokens": 256})
	if got := shapes(free.Output); len(got) != 3 || got[1].Type != protocol.ItemMCPCall || got[2].Text != "It is sunny in Paris." {
		t.Errorf("a read-only tool, never approved: %+v", got)
	}

	// Each round is a request of the tenant's budget: one of one request
	// a minute has its second round refused, after the call ran.
	calls := len(srv.Calls())
	status, raw := callJSON(t, http.MethodPost, front+protocol.PathResponses, map[string]any{"input": q, "tools": readOnly, "max_output_tokens": 256}, "X-Tenant", "tight")
	if status != http.StatusTooManyRequests || len(srv.Calls()) != calls+1 {
		t.Errorf("a tenant's budget of one request: %d %s; the server ran %q", status, raw, srv.Calls()[calls:])
	}

	status, raw = callJSON(t, http.MethodPost, front+protocol.PathResponses, map[string]any{"input": []any{map[string]any{"role": "user", "content": q},
		map[string]any{"type": "mcp_approval_response", "approval_request_id": "mcpr_none", "approve": true}}, "tools": tools})
	if status != http.StatusBadRequest || !strings.Contains(string(raw), "mcpr_none") {
		t.Errorf("an approval of no request: %d %s", status, raw)
	}
}

// Only the servers the configuration allows are called: a server_url it
// does not name nor allow is a 400 naming the tool's server_url, and
// that server gets no request; a URL under an allowed prefix is called;
// a server_label alone names a configured server; a URL with dot
// segments, an unknown label, a header of the transport's are refused.
// Without MCP hosting configured, mcp tools are left out as before.
func TestMCPAllowedServers(t *testing.T) {
	c := startMCPCore(t)
	named, prefixed, other := mcptest.Start(t), mcptest.Start(t), mcptest.Start(t)
	front := c.mcpFront(t, mcpclient.Config{Servers: []mcpclient.Server{{Name: "weather", URL: named.URL}},
		Allow: []string{strings.TrimSuffix(prefixed.URL, "/mcp") + "/"}}, 0)
	ask := func(tool map[string]any) (int, []byte) {
		return callJSON(t, http.MethodPost, front+protocol.PathResponses, map[string]any{"input": "What is the weather in Paris?",
			"tools": []any{map[string]any{"type": "function", "name": "f"}, tool}, "max_output_tokens": 256})
	}
	for _, tc := range []struct {
		what  string
		tool  map[string]any
		param string
	}{
		{"another server", mcpTool("wx", other.URL, "never"), "tools[1].server_url"},
		{"dot segments", mcpTool("wx", strings.TrimSuffix(prefixed.URL, "/mcp")+"/x/../mcp", "never"), "tools[1].server_url"},
		{"an unknown label", map[string]any{"type": "mcp", "server_label": "nowhere"}, "tools[1].server_label"},
		{"a transport's header", mcpTool("wx", "weather", "never", "headers", map[string]string{"Mcp-Session-Id": "x"}), "tools[1].headers"},
		{"a connector", map[string]any{"type": "mcp", "server_label": "wx", "connector_id": "connector_gmail"}, "tools[1]"},
	} {
		status, raw := ask(tc.tool)
		var e protocol.ErrorBody
		if status != http.StatusBadRequest || json.Unmarshal(raw, &e) != nil || deref(e.Error.Param) != tc.param {
			t.Errorf("%s: %d %s, want a 400 naming %s", tc.what, status, raw, tc.param)
		}
	}
	if n := other.Requests(); n != 0 {
		t.Errorf("the server not allowed got %d requests", n)
	}
	for _, tool := range []map[string]any{mcpTool("wx", prefixed.URL, "never"), {"type": "mcp", "server_label": "weather", "require_approval": "never"}} {
		if status, raw := ask(tool); status != http.StatusOK || !strings.Contains(string(raw), "It is sunny in Paris.") {
			t.Errorf("%v: %d %s", tool, status, raw)
		}
	}
	if len(prefixed.Calls()) != 1 || len(named.Calls()) != 1 {
		t.Errorf("the servers ran %q and %q", prefixed.Calls(), named.Calls())
	}

	status, raw, header := callJSONHeader(t, c.base+protocol.PathResponses, map[string]any{"input": "hello", "tools": []any{mcpTool("wx", other.URL, "never")}, "max_output_tokens": 4})
	if status != http.StatusOK || header.Get(HeaderToolsSkipped) != "mcp" || other.Requests() != 0 {
		t.Errorf("without hosting: %d %s, %s %q", status, raw, HeaderToolsSkipped, header.Get(HeaderToolsSkipped))
	}
}

// A server that hangs ends in the call's timeout, never a hung request:
// a call that does not answer is an mcp_call failed with an http_error
// 504, which the model reads and answers; a server that does not answer
// its listing is a 424. A tool's own error is an mcp_tool_execution_error;
// an output over the bound is cut, with a marker; a model that calls
// for ever stops at the rounds' bound, its last round offered no hosted
// tool.
func TestMCPBounds(t *testing.T) {
	c := startMCPCore(t)
	srv := mcptest.Start(t)
	hanging, got := mcptest.Hanging(t)
	front := c.mcpFront(t, mcpclient.Config{Servers: []mcpclient.Server{{Name: "weather", URL: srv.URL}, {Name: "hanging", URL: hanging}},
		Timeout: 2 * time.Second, MaxOutput: 1000}, 3)
	ask := func(q string) protocol.Response {
		return postResponse(t, front, map[string]any{"input": q, "tools": []any{mcpTool("wx", "weather", "never")}, "max_output_tokens": 256})
	}
	tc := []struct {
		q    string
		want []shape
	}{
		{"Use the slow tool please", []shape{{Type: protocol.ItemMCPCall, Status: protocol.ResponseFailed, Name: "slow", Arguments: "{}", Error: "http_error"},
			{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: "The tool timed out."}}},
		{"fail please", []shape{{Type: protocol.ItemMCPCall, Status: protocol.ResponseFailed, Name: "fail", Arguments: "{}", Error: "mcp_tool_execution_error"},
			{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: "The service is down."}}},
		{"a big answer please", []shape{{Type: protocol.ItemMCPCall, Status: protocol.ResponseCompleted, Name: "big", Arguments: `{"bytes":5000}`,
			Output: strings.Repeat("x", 1000) + "\n[output truncated: 1000 of 5000 bytes]"},
			{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: "The answer was long."}}},
		{"loop forever", []shape{
			{Type: protocol.ItemMCPCall, Status: protocol.ResponseCompleted, Name: "echo", Arguments: `{"text":"loop forever"}`, Output: "loop forever"},
			{Type: protocol.ItemMCPCall, Status: protocol.ResponseCompleted, Name: "echo", Arguments: `{"text":"loop forever"}`, Output: "loop forever"},
			{Type: protocol.ItemMessage, Status: protocol.ResponseCompleted, Text: mcpReplies[8].reply}}},
	}
	var loop protocol.Response
	for _, tc := range tc {
		r := ask(tc.q)
		if got := shapes(r.Output[1:]); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v\nwant %+v", tc.q, got, tc.want)
		}
		loop = r
	}
	// max_output_tokens bounds the rounds together: each of the loop's
	// three rounds wrote the same call; a response allowed one round's
	// tokens ends after its call, one allowed a few more is cut in the
	// second round.
	perRound := loop.Usage.OutputTokens / 3
	for _, extra := range []int{0, 3} {
		r := postResponse(t, front, map[string]any{"input": "loop forever", "tools": []any{mcpTool("wx", "weather", "never")}, "max_output_tokens": perRound + extra})
		if r.Status != protocol.ResponseIncomplete || r.Usage.OutputTokens > perRound+extra || len(r.Output) != 2+min(extra, 1) || r.Output[1].Type != protocol.ItemMCPCall {
			t.Errorf("max_output_tokens %d: %s, %d output tokens, %+v", perRound+extra, r.Status, r.Usage.OutputTokens, shapes(r.Output))
		}
	}
	var e struct{ Code int }
	if r := ask("Use the slow tool please"); json.Unmarshal(r.Output[1].Error, &e) != nil || e.Code != http.StatusGatewayTimeout {
		t.Errorf("a call that timed out: %s", r.Output[1].Error)
	}

	status, raw := callJSON(t, http.MethodPost, front+protocol.PathResponses, map[string]any{"input": "hello", "tools": []any{mcpTool("hang", "hanging", "never")}})
	if status != http.StatusFailedDependency || !strings.Contains(string(raw), "hang") || got() == 0 {
		t.Errorf("a server that does not list: %d %s (%d requests)", status, raw, got())
	}
}
