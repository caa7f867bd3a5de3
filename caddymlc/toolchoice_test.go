package caddymlc

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
)

// bookTable is the strict schema of the required-call tests' tool.
const bookTable = `{"type":"object","properties":{"guests":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","pattern":"^[A-Z][a-z]{1,8}$"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false},"minItems":1,"maxItems":3},"when":{"type":"string","pattern":"^[0-9]{2}:[0-9]{2}$"},"vip":{"type":"boolean"}},"required":["guests","when","vip"],"additionalProperties":false}`

// sdkRequiredCalls asks each API for a required or named call (and for
// one of allowed_tools, required over one of the tools) with the
// official SDKs, whole and streamed; chat through openai's
// beta.chat.completions.parse, which parses a strict tool's arguments.
// Each outcome is the SDK's calls (name, arguments parsed), or its error.
const sdkRequiredCalls = `
const OpenAI = require("openai");
const Anthropic = require("@anthropic-ai/sdk");
(async () => {
  const openai = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: process.env.BASE, apiKey: "unused", maxRetries: 0 });
  const schema = JSON.parse(process.env.SCHEMA);
  const fn = { name: "book_table", description: "Book a table", parameters: schema, strict: true };
  const ping = { name: "ping", description: "Ping", parameters: { type: "object", properties: {}, additionalProperties: false }, strict: true };
  const q = "the cat sat on";
  const out = {};
  const step = async (what, f) => {
    try { out[what] = await f(); } catch (e) { out[what] = { error: e.message || String(e) }; }
  };
  const chat = { model: "tiny", max_tokens: 300, messages: [{ role: "user", content: q }],
    tools: [{ type: "function", function: ping }, { type: "function", function: fn }] };
  const chatCalls = (r) => ({ stop: r.choices[0].finish_reason,
    calls: (r.choices[0].message.tool_calls || []).map((t) => ({ name: t.function.name, args: t.function.parsed_arguments })) });
  await step("chatRequired", async () => chatCalls(await openai.beta.chat.completions.parse({ ...chat, tool_choice: "required" })));
  await step("chatNamed", async () => chatCalls(await openai.beta.chat.completions.parse({ ...chat, tool_choice: { type: "function", function: { name: "book_table" } } })));
  await step("chatNamedStream", async () => chatCalls(await openai.beta.chat.completions.stream({ ...chat, tool_choice: { type: "function", function: { name: "book_table" } } }).finalChatCompletion()));
  await step("chatAllowed", async () => chatCalls(await openai.beta.chat.completions.parse({ ...chat,
    tool_choice: { type: "allowed_tools", allowed_tools: { mode: "required", tools: [{ type: "function", function: { name: "book_table" } }] } } })));

  const msgs = { model: "tiny", max_tokens: 300, messages: [{ role: "user", content: q }],
    tools: [{ name: "book_table", description: "Book a table", input_schema: schema }] };
  const msgCalls = (m) => ({ stop: m.stop_reason,
    calls: m.content.filter((b) => b.type === "tool_use").map((b) => ({ name: b.name, args: b.input })) });
  await step("messagesAny", async () => msgCalls(await anthropic.messages.create({ ...msgs, tool_choice: { type: "any" } })));
  await step("messagesToolStream", async () => msgCalls(await anthropic.messages.stream({ ...msgs, tool_choice: { type: "tool", name: "book_table" } }).finalMessage()));

  const resp = { model: "tiny", max_output_tokens: 300, input: q, tools: [{ type: "function", ...fn }] };
  const respCalls = (r) => ({ stop: r.status,
    calls: r.output.filter((i) => i.type === "function_call").map((i) => ({ name: i.name, args: JSON.parse(i.arguments) })) });
  await step("responsesRequired", async () => respCalls(await openai.responses.create({ ...resp, tool_choice: "required" })));
  await step("responsesNamedStream", async () => respCalls(await openai.responses.stream({ ...resp, tool_choice: { type: "function", name: "book_table" } }).finalResponse()));
  await step("responsesAllowedStream", async () => respCalls(await openai.responses.stream({ ...resp, tools: [...resp.tools, { type: "function", ...ping }],
    tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "book_table" }] } }).finalResponse()));
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestSDKRequiredToolCalls: a client of the official SDKs that requires
// a call gets one, whose arguments validate against the tool's schema.
func TestSDKRequiredToolCalls(t *testing.T) {
	s := startSite(t, 2, "")
	type outcome struct {
		Stop, Error string
		Calls       []struct {
			Name string
			Args json.RawMessage
		}
	}
	var got map[string]outcome
	mustUnmarshal(t, npmref.NodeScript(t, sdkRequiredCalls, "BASE="+s.base, "SCHEMA="+bookTable), &got)
	schema := schematest.Compile(t, bookTable)
	for what, want := range map[string]struct{ stop, name string }{
		"chatRequired": {"tool_calls", ""}, "chatNamed": {"tool_calls", "book_table"}, "chatNamedStream": {"tool_calls", "book_table"},
		"messagesAny": {"tool_use", "book_table"}, "messagesToolStream": {"tool_use", "book_table"},
		"responsesRequired": {"completed", "book_table"}, "responsesNamedStream": {"completed", "book_table"},
		"chatAllowed": {"tool_calls", "book_table"}, "responsesAllowedStream": {"completed", "book_table"},
	} {
		o := got[what]
		if o.Error != "" || o.Stop != want.stop || len(o.Calls) != 1 || (want.name != "" && o.Calls[0].Name != want.name) {
			t.Errorf("%s: the SDK got %+v, want one call of %q, stop %q", what, o, want.name, want.stop)
			continue
		}
		call := o.Calls[0]
		switch call.Name {
		case "book_table":
			schematest.Validate(t, schema, what+": the arguments", string(call.Args))
		case "ping":
			if string(call.Args) != "{}" {
				t.Errorf("%s: ping's arguments %s", what, call.Args)
			}
		default:
			t.Errorf("%s: called %q", what, call.Name)
		}
		t.Logf("%s: %s %s", what, call.Name, call.Args)
	}
}
