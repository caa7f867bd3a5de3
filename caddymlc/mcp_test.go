package caddymlc

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mcptest"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
)

// The mcp_* options parse; bad values are errors that name the option.
func TestCaddyfileMCP(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:9001
		mcp_server docs https://docs.example.com/mcp header Authorization "Bearer {env.DOCS_TOKEN}" header X-Team ml
		mcp_server wiki http://10.0.0.7:8000/mcp
		mcp_allow https://mcp.example.com/ https://tools.example.org/mcp
		mcp_timeout 5s
		mcp_max_output 16KiB
		mcp_max_rounds 4
	}`)); err != nil {
		t.Fatal(err)
	}
	want := MCP{MCPServers: []MCPServer{
		{Name: "docs", URL: "https://docs.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer {env.DOCS_TOKEN}", "X-Team": "ml"}},
		{Name: "wiki", URL: "http://10.0.0.7:8000/mcp"}},
		MCPAllow: []string{"https://mcp.example.com/", "https://tools.example.org/mcp"}, MCPTimeout: caddy.Duration(5 * time.Second),
		MCPMaxOutput: 16 << 10, MCPMaxRounds: 4}
	if !reflect.DeepEqual(h.MCP, want) {
		t.Fatalf("%+v\nwant %+v", h.MCP, want)
	}
	for _, bad := range []string{"mcp_server docs", "mcp_server docs https://x/mcp header A", "mcp_server docs https://x/mcp token A B",
		"mcp_allow", "mcp_timeout soon", "mcp_timeout 1s\nmcp_timeout 2s", "mcp_max_output big", "mcp_max_rounds 1", "mcp_max_rounds x"} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\nendpoint 127.0.0.1:9001\n" + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "mcp_") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// mcpSDKs drives hosted MCP tools with the official clients of the agent
// set (openai 7, the Agents SDK): responses.create whole and streamed,
// with approval (previous_response_id), with a refused server URL, with a
// tool that hangs; then an Agent with hostedMcpTool, whole, streamed and
// approving through onApproval. Each outcome is what the client parsed,
// or the error it threw.
const mcpSDKs = `
const OpenAI = require("openai");
const { Agent, run, hostedMcpTool, setTracingDisabled, setDefaultOpenAIClient } = require("@openai/agents");
(async () => {
  setTracingDisabled(true);
  const openai = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  setDefaultOpenAIClient(openai);
  const q = "What is the weather in Paris?";
  const mcp = (extra) => ({ type: "mcp", server_label: "wx", server_url: process.env.MCP, require_approval: "never", ...extra });
  const params = { model: "tiny", input: q, max_output_tokens: 256, tools: [mcp()] };
  const out = {};
  const step = async (what, f) => {
    try { out[what] = await f(); } catch (e) { out[what] = { error: e.message || String(e), status: e.status, param: e.param }; }
  };
  // output_text is the SDK's for a whole response; a stream's has the message's.
  const text = (r) => r.output_text || r.output.filter((i) => i.type === "message").map((i) => i.content.map((c) => c.text).join("")).join("");
  const summary = (r) => ({ status: r.status, text: text(r),
    items: r.output.map((i) => ({ type: i.type, name: i.name || "", output: i.output || "", error: i.error || null, approval: i.approval_request_id || "" })) });

  await step("whole", async () => summary(await openai.responses.create(params)));
  await step("streamed", async () => {
    const types = [];
    let final = null;
    for await (const e of await openai.responses.create({ ...params, stream: true })) {
      if (types[types.length - 1] !== e.type) types.push(e.type);
      if (e.type === "response.completed") final = e.response;
    }
    return { types, ...summary(final) };
  });
  await step("approval", async () => {
    const tools = [mcp({ require_approval: "always" })];
    const first = await openai.responses.create({ ...params, tools });
    const req = first.output.find((i) => i.type === "mcp_approval_request");
    const second = await openai.responses.create({ model: "tiny", previous_response_id: first.id, tools,
      input: [{ type: "mcp_approval_response", approval_request_id: req.id, approve: true }] });
    return { first: summary(first), second: summary(second) };
  });
  await step("refused", async () => summary(await openai.responses.create({ ...params, tools: [mcp({ server_url: process.env.REFUSED })] })));
  await step("hanging", async () => summary(await openai.responses.create({ ...params, input: "Use the slow tool please" })));

  const agent = (tool) => new Agent({ name: "forecaster", instructions: "Answer briefly.", model: "tiny", tools: [tool] });
  const never = hostedMcpTool({ serverLabel: "wx", serverUrl: "weather", requireApproval: "never" });
  let approvals = 0;
  const always = hostedMcpTool({ serverLabel: "wx", serverUrl: process.env.MCP, requireApproval: "always",
    onApproval: async () => { approvals++; return { approve: true }; } });
  for (const [what, tool, stream] of [["agentWhole", never, false], ["agentStreamed", never, true], ["agentApproved", always, false]]) {
    await step(what, async () => {
      const r = await run(agent(tool), q, { stream, maxTurns: 4 });
      if (stream) { for await (const _ of r) {} await r.completed; }
      return { final: r.finalOutput };
    });
  }
  out.approvals = approvals;
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// Hosted MCP tools through the official clients, against an MCP server
// the test starts (the Go SDK's): openai's responses.create runs the
// tool whole and streamed (OpenAI's events), asks for approval and runs
// the approved call, refuses a server the Caddyfile does not allow (a 400
// naming the tool's server_url, the server not reached) and ends a call
// that hangs at mcp_timeout with the model's answer to the error; the
// Agents SDK's hostedMcpTool gets the answer whole, streamed and through
// onApproval.
func TestMCPThroughSDKs(t *testing.T) {
	srv, refused := mcptest.Start(t), mcptest.Start(t)
	replies := []cannedReply{{Match: "", Reply: "ok"},
		{Match: "weather in Paris", Reply: toolCall("get_weather", map[string]any{"city": "Paris"})},
		{Match: fmt.Sprintf(mcptest.WeatherOf, "Paris"), Reply: "It is sunny in Paris."},
		{Match: "slow tool please", Reply: toolCall("slow", map[string]any{})},
		{Match: "did not answer", Reply: "The tool timed out."}}
	file := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(file, []byte(mustJSON(replies)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSite(t, 2, fmt.Sprintf("\t\t\tmode disagg\n\t\t\tengine_args --replies %q\n\t\t\tmcp_server weather %s\n\t\t\tmcp_timeout 2s\n", file, srv.URL))
	stdout, stderr, err := npmref.AgentScript(t, agentTimeout, mcpSDKs, "BASE="+s.base, "MCP="+srv.URL, "REFUSED="+refused.URL,
		"OPENAI_AGENTS_DISABLE_TRACING=1", "OPENAI_API_KEY=unused")
	if err != nil {
		t.Fatalf("script: %v\nstdout:\n%s\nstderr:\n%s", err, tail(stdout), tail(stderr))
	}
	type item struct {
		Type, Name, Output, Approval string
		Error                        *struct {
			Type string
			Code int
		}
	}
	type response struct {
		Status             any // a response's, or an error's HTTP status
		Text, Error, Param string
		Items              []item
		Types              []string
	}
	var got struct {
		Whole, Streamed, Refused, Hanging        response
		Approval                                 struct{ First, Second response }
		AgentWhole, AgentStreamed, AgentApproved struct{ Final, Error string }
		Approvals                                int
	}
	mustUnmarshal(t, stdout, &got)

	const answer = "It is sunny in Paris."
	ran := []item{{Type: "mcp_list_tools"}, {Type: "mcp_call", Name: "get_weather", Output: fmt.Sprintf(mcptest.WeatherOf, "Paris")}, {Type: "message"}}
	for what, r := range map[string]response{"whole": got.Whole, "streamed": got.Streamed} {
		if r.Status != "completed" || r.Text != answer || !reflect.DeepEqual(r.Items, ran) {
			t.Errorf("%s: %+v", what, r)
		}
	}
	wantTypes := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed", "response.output_item.done",
		"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
		"response.mcp_call.completed", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed"}
	if !reflect.DeepEqual(got.Streamed.Types, wantTypes) {
		t.Errorf("streamed events %q\nwant %q", got.Streamed.Types, wantTypes)
	}
	if a := got.Approval; len(a.First.Items) != 2 || a.First.Items[1].Type != "mcp_approval_request" || a.Second.Text != answer ||
		len(a.Second.Items) != 2 || a.Second.Items[0].Type != "mcp_call" || a.Second.Items[0].Approval == "" {
		t.Errorf("approval: %+v", a)
	}
	if r := got.Refused; fmt.Sprint(r.Status) != "400" || r.Param != "tools[0].server_url" || refused.Requests() != 0 {
		t.Errorf("refused: %+v (%d requests reached it)", r, refused.Requests())
	}
	if h := got.Hanging; h.Text != "The tool timed out." || len(h.Items) != 3 || h.Items[1].Error == nil || h.Items[1].Error.Type != "http_error" || h.Items[1].Error.Code != 504 {
		t.Errorf("hanging: %+v", h)
	}
	for what, r := range map[string]struct{ Final, Error string }{"whole": got.AgentWhole, "streamed": got.AgentStreamed, "approved": got.AgentApproved} {
		if r.Final != answer {
			t.Errorf("Agents SDK, %s: %+v", what, r)
		}
	}
	if got.Approvals != 1 {
		t.Errorf("onApproval was asked %d times, want once", got.Approvals)
	}
}
