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

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mcptest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
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

// mcpFront is a core answering mcpReplies behind a front that stores
// responses and hosts MCP tools on the servers cfg allows, at most
// rounds rounds an answer.
type mcpFront struct {
	*core
	front string
}

func startMCPCore(t *testing.T) *core {
	t.Helper()
	var replies []map[string]string
	for _, r := range mcpReplies {
		replies = append(replies, map[string]string{"match": r.match, "reply": r.reply})
	}
	file := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(file, []byte(mustMarshal(t, replies)), 0o644); err != nil {
		t.Fatal(err)
	}
	return startCoreArgs(t, 2, Config{Mode: ModeDisagg}, nil, "--replies", file)
}

func (c *core) mcpFront(t *testing.T, cfg mcpclient.Config, rounds int) string {
	t.Helper()
	hosts, err := mcpclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hosts.Close)
	m := NewModels([]*Router{c.r}, 0)
	m.StoreResponses(&memStore{}, 0)
	m.HostMCP(hosts, rounds)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return srv.URL
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
}

var _ = time.Second
