package caddymlc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
)

// The agent clients, end to end: Claude Code (Messages API), the Codex
// CLI (Responses API) and the OpenAI Agents SDK (Responses and Chat
// Completions) each read a file through one tool call against a site
// whose built-in engines answer from a --replies file, and report the
// word in it. What each client sends is captured in full under
// /work/captures/<client>/ (SUMMARY.md there); the findings that made
// each one run are noted at its test.

// agentTask is the prompt every client gets; agentSecret the file's
// content, and agentAnswer the final text the engines give once the
// file's content is in the prompt.
const (
	agentTask   = "Read the file secret.txt and tell me the word in it"
	agentSecret = "the secret word is MARMALADE"
	agentAnswer = "The word is MARMALADE."
	// agentTimeout bounds each client run; its process group is killed
	// past it.
	agentTimeout = 3 * time.Minute
)

// cannedReply is one entry of the built-in engine's --replies file: the
// engine answers the reply of the entry whose match occurs latest in the
// prompt text ("" matches any prompt).
type cannedReply struct {
	Match string `json:"match"`
	Reply string `json:"reply"`
}

// toolCall is an answer the router parses into a tool call (the tiny
// chat template renders tools Hermes-style).
func toolCall(name string, args map[string]any) string {
	return "<tool_call>" + mustJSON(map[string]any{"name": name, "arguments": args}) + "</tool_call>"
}

// agentReplies: the task gets the tool call, a prompt with the file's
// content in it (the tool's result) the final answer, and anything else
// a client asks (a title, a probe) "ok".
func agentReplies(call string) []cannedReply {
	return []cannedReply{{Match: "", Reply: "ok"}, {Match: agentTask, Reply: call}, {Match: "MARMALADE", Reply: agentAnswer}}
}

// startRepliesSite starts the main Caddyfile's fleet, model tiny in
// disagg mode over two built-in engines, answering from replies. Claude
// Code's max_tokens (32,000) is above the tiny model's context: the
// router caps it to what the context leaves.
func startRepliesSite(t *testing.T, replies []cannedReply) *site {
	t.Helper()
	file := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(file, []byte(mustJSON(replies)), 0o644); err != nil {
		t.Fatal(err)
	}
	return startSite(t, 2, fmt.Sprintf("\t\t\tmode disagg\n\t\t\tengine_args --replies %q\n", file))
}

// agentWorkdir is a working directory with secret.txt in it; it returns
// the directory and the file's absolute path.
func agentWorkdir(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(file, []byte(agentSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// agentEnv is a clean environment for a client: PATH, a HOME of its own
// and vars; nothing else is inherited (no real keys, no proxies).
func agentEnv(t *testing.T, vars ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}, vars...)
}

// runAgent runs a client CLI for at most agentTimeout and returns its
// stdout; a failure to run is fatal, with what it printed.
func runAgent(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	out, errOut, err := npmref.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(cmd.Path), err, tail(out), tail(errOut))
	}
	return out
}

// jsonLines decodes each line of out that is a JSON object.
func jsonLines(out []byte) []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// tail is the end of a client's output, for failure messages.
func tail(b []byte) string {
	const max = 6000
	if len(b) > max {
		return "…" + string(b[len(b)-max:])
	}
	return string(b)
}

// agentInstructions replace the clients' own system prompts (Claude
// Code's --system-prompt, Codex's model_instructions_file), and only the
// tools the task needs are offered: their defaults (about 40,000 tokens
// of instructions and tool schemas with the tiny model's word-level
// tokenizer) are more than the tiny model's context holds, and minutes
// of prefill on the built-in CPU engine. A real model's context and a
// GPU take them as they are.
const agentInstructions = "You are a coding agent. Use your tools to read files and run commands, then answer briefly."

// Claude Code 2.1.328 in print mode. What made it run:
//   - env: ANTHROPIC_BASE_URL (the site, no /v1), ANTHROPIC_API_KEY (sent
//     as x-api-key), ANTHROPIC_MODEL and ANTHROPIC_SMALL_FAST_MODEL=tiny,
//     DISABLE_TELEMETRY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC,
//     DISABLE_AUTOUPDATER, DISABLE_ERROR_REPORTING, HOME a temp dir. With
//     these it sends nothing but POST /v1/messages?beta=true (streamed;
//     no count_tokens, title or probe requests).
//   - flags: -p <task> --tools Read --allowedTools Read
//     --system-prompt <agentInstructions> --permission-mode dontAsk
//     --max-turns 4 --output-format stream-json --verbose (stream-json
//     needs --verbose; it prints the tool_use, the tool_result and the
//     final result as JSON lines); stdin empty.
//   - it sends anthropic-beta (claude-code-20250219, interleaved thinking,
//     context-management, ...), thinking {type: adaptive}, output_config,
//     context_management, cache_control on system/tool_result blocks, a
//     role "system" message inside messages, 12 tools without a type
//     (one with defer_loading). Its Read tool takes {"file_path": abs}
//     and returns the file cat -n style ("1\tthe secret word is ...").
//   - stderr says "[claude-code:unrecognized_model]" for tiny: harmless.
func TestAgentClaudeCode(t *testing.T) {
	work, secret := agentWorkdir(t)
	s := startRepliesSite(t, agentReplies(toolCall("Read", map[string]any{"file_path": secret})))
	cmd := exec.Command(npmref.AgentBin(t, "claude"), "-p", agentTask, "--tools", "Read", "--allowedTools", "Read", "--permission-mode", "dontAsk",
		"--system-prompt", agentInstructions, "--max-turns", "4", "--output-format", "stream-json", "--verbose")
	cmd.Dir = work
	cmd.Env = agentEnv(t, "ANTHROPIC_BASE_URL="+s.base, "ANTHROPIC_API_KEY=test", "ANTHROPIC_MODEL=tiny", "ANTHROPIC_SMALL_FAST_MODEL=tiny",
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1")
	out := runAgent(t, cmd)

	var used, resulted bool
	var result map[string]any
	for _, l := range jsonLines(out) {
		msg, _ := l["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			b, _ := b.(map[string]any)
			switch b["type"] {
			case "tool_use":
				in, _ := b["input"].(map[string]any)
				used = used || b["name"] == "Read" && in["file_path"] == secret
			case "tool_result":
				resulted = resulted || strings.Contains(fmt.Sprint(b["content"]), agentSecret)
			}
		}
		if l["type"] == "result" {
			result = l
		}
	}
	if !used || !resulted {
		t.Errorf("Claude Code did not run Read on %s (tool_use %v, its result with the content %v); it printed:\n%s", secret, used, resulted, tail(out))
	}
	if result == nil || result["is_error"] != false || !strings.Contains(fmt.Sprint(result["result"]), agentAnswer) {
		t.Errorf("Claude Code's result %v, want %q; it printed:\n%s", result, agentAnswer, tail(out))
	}
}

// The Codex CLI 0.169.0, codex exec. What made it run:
//   - a provider of its own through -c overrides (no config.toml):
//     model_providers.fleet.{name, base_url (the site + /v1),
//     wire_api=responses, env_key=FLEET_API_KEY (sent as a bearer)},
//     model_provider=fleet, model=tiny, model_instructions_file, and the
//     goals, multi_agent and skills features and view_image tool off
//     (see agentInstructions); analytics.enabled=false and
//     check_for_update_on_startup=false keep it off the network.
//   - --skip-git-repo-check (the workdir is no repository), -s read-only
//     (its sandbox lets the shell read), --json (JSON lines: the
//     command_execution item with its output, the agent_message), stdin
//     empty (else it waits to append stdin to the prompt); HOME and
//     CODEX_HOME temp dirs (it warns it will not put helper binaries
//     under /tmp: harmless), and says "Model metadata for `tiny` not
//     found" as an error item: harmless too.
//   - it sends POST /v1/responses only, streamed, with store false,
//     reasoning {summary: auto}, include [reasoning.encrypted_content],
//     prompt_cache_key, client_metadata, no instructions (developer
//     messages instead), tools of type function, namespace (nested
//     functions) and web_search. Its shell tool is exec_command
//     {"cmd": "<shell line>"}.
func TestAgentCodex(t *testing.T) {
	work, secret := agentWorkdir(t)
	s := startRepliesSite(t, agentReplies(toolCall("exec_command", map[string]any{"cmd": "cat " + secret})))
	instructions := filepath.Join(t.TempDir(), "instructions.md")
	if err := os.WriteFile(instructions, []byte(agentInstructions), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(npmref.AgentBin(t, "codex"), "exec", "--skip-git-repo-check", "-s", "read-only", "--json",
		"-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
		"-c", "model_providers.fleet.name=fleet", "-c", "model_providers.fleet.base_url="+s.base+"/v1",
		"-c", "model_providers.fleet.wire_api=responses", "-c", "model_providers.fleet.env_key=FLEET_API_KEY",
		"-c", "model_provider=fleet", "-c", "model=tiny", "-c", "model_instructions_file="+instructions,
		"-c", "features.goals=false", "-c", "features.multi_agent=false", "-c", "features.skills=false", "-c", "tools.view_image=false", agentTask)
	cmd.Dir = work
	cmd.Env = agentEnv(t, "CODEX_HOME="+t.TempDir(), "FLEET_API_KEY=test")
	out := runAgent(t, cmd)

	var ran bool
	var said []string
	for _, l := range jsonLines(out) {
		item, _ := l["item"].(map[string]any)
		if l["type"] != "item.completed" || item == nil {
			continue
		}
		switch item["type"] {
		case "command_execution":
			ran = ran || strings.Contains(fmt.Sprint(item["command"]), secret) &&
				strings.Contains(fmt.Sprint(item["aggregated_output"]), agentSecret) && item["exit_code"] == 0.0
		case "agent_message":
			said = append(said, fmt.Sprint(item["text"]))
		}
	}
	if !ran {
		t.Errorf("Codex did not run `cat %s` reading %q; it printed:\n%s", secret, agentSecret, tail(out))
	}
	if !strings.Contains(strings.Join(said, "\n"), agentAnswer) {
		t.Errorf("Codex said %q, want %q; it printed:\n%s", said, agentAnswer, tail(out))
	}
}

// agentsSDK runs an Agent with one function tool (zod parameters) that
// reads a file, whole and streamed, through the Responses API or, with
// API=chat_completions, Chat Completions. Tracing is off; the client is
// the agent set's own openai 7, pointed at the site.
const agentsSDK = `
const { Agent, run, tool, setTracingDisabled, setDefaultOpenAIClient, setOpenAIAPI } = require("@openai/agents");
const OpenAI = require("openai");
const { z } = require("zod");
const fs = require("fs");
(async () => {
  setTracingDisabled(true);
  setDefaultOpenAIClient(new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 }));
  if (process.env.API === "chat_completions") setOpenAIAPI("chat_completions");
  const calls = [];
  const readFile = tool({
    name: "read_file", description: "Read a file and return its content",
    parameters: z.object({ path: z.string() }),
    execute: async ({ path }) => { calls.push(path); return fs.readFileSync(path, "utf8"); },
  });
  const agent = new Agent({ name: "reader", instructions: "Use the tools to read files.", model: "tiny", tools: [readFile] });
  const out = { calls };
  for (const stream of [false, true]) {
    const what = stream ? "streamed" : "whole";
    try {
      const r = await run(agent, process.env.TASK, { stream, maxTurns: 4 });
      if (stream) { for await (const _ of r) {} await r.completed; }
      out[what] = { final: r.finalOutput };
    } catch (e) { out[what] = { error: String(e && e.message || e) }; }
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The OpenAI Agents SDK 0.20.0 (@openai/agents). What made it run: it
// depends on openai ^7 (not the reference set's 4.x), so the agent set
// pins openai 7.60.0 beside it; setDefaultOpenAIClient(new OpenAI({baseURL}))
// and setTracingDisabled(true) (OPENAI_AGENTS_DISABLE_TRACING too) keep it
// on the site. It sends model, instructions, input (the user message
// without a type), include [], tools (function, strict true, a draft-07
// $schema) and stream; on Chat Completions model, messages, tools, stream
// (+ stream_options.include_usage when streamed), no tool_choice.
func TestAgentOpenAIAgentsSDK(t *testing.T) {
	for _, api := range []string{"responses", "chat_completions"} {
		t.Run(api, func(t *testing.T) {
			_, secret := agentWorkdir(t)
			s := startRepliesSite(t, agentReplies(toolCall("read_file", map[string]any{"path": secret})))
			stdout, stderr, err := npmref.AgentScript(t, agentTimeout, agentsSDK, "BASE="+s.base, "API="+api, "TASK="+agentTask,
				"OPENAI_AGENTS_DISABLE_TRACING=1", "OPENAI_API_KEY=unused")
			if err != nil {
				t.Fatalf("agent script: %v\nstdout:\n%s\nstderr:\n%s", err, tail(stdout), tail(stderr))
			}
			type result struct{ Final, Error string }
			var got struct {
				Calls           []string
				Whole, Streamed result
			}
			mustUnmarshal(t, stdout, &got)
			if want := []string{secret, secret}; !reflect.DeepEqual(got.Calls, want) {
				t.Errorf("the tool ran on %q, want %q (whole, then streamed); the runs: %+v, %+v", got.Calls, want, got.Whole, got.Streamed)
			}
			for what, r := range map[string]result{"whole": got.Whole, "streamed": got.Streamed} {
				if r.Final != agentAnswer {
					t.Errorf("%s: final output %q, want %q; error: %s", what, r.Final, agentAnswer, r.Error)
				}
			}
		})
	}
}

// sdkTools drives one tool call through each API with the official SDKs
// of the reference set (openai 4.x, @anthropic-ai/sdk): Chat Completions
// whole and through beta.chat.completions.stream().finalChatCompletion()
// (openai 4.x has the stream helper under beta), Messages whole and
// through messages.stream().finalMessage(), Responses whole and through
// responses.stream().finalResponse(); then each API's second turn with
// the tool's result, whole. Each outcome is what the SDK parsed, or the
// error it threw.
const sdkTools = `
const OpenAI = require("openai");
const Anthropic = require("@anthropic-ai/sdk");
(async () => {
  const openai = new OpenAI({ baseURL: process.env.BASE + "/v1", apiKey: "unused", maxRetries: 0 });
  const anthropic = new Anthropic({ baseURL: process.env.BASE, apiKey: "unused", maxRetries: 0 });
  const q = "What is the weather in Paris?", result = "Sunny, 22 degrees";
  const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
  const fn = { name: "get_weather", description: "The weather in a city", parameters: schema };
  const out = {};
  const step = async (what, f) => {
    try { out[what] = await f(); } catch (e) { out[what] = { error: e.message || String(e) }; }
  };

  const chat = { model: "tiny", max_tokens: 256, messages: [{ role: "user", content: q }], tools: [{ type: "function", function: fn }] };
  const chatCalls = (r) => {
    const c = r.choices[0];
    return { stop: c.finish_reason, text: c.message.content,
      calls: (c.message.tool_calls || []).map((t) => ({ id: t.id, type: t.type, name: t.function.name, args: JSON.parse(t.function.arguments) })) };
  };
  let chatMsg;
  await step("chatWhole", async () => { const r = await openai.chat.completions.create(chat); chatMsg = r.choices[0].message; return chatCalls(r); });
  await step("chatStream", async () => chatCalls(await openai.beta.chat.completions.stream(chat).finalChatCompletion()));
  await step("chatResult", async () => {
    if (!chatMsg) throw new Error("not tried: the first turn failed");
    const r = await openai.chat.completions.create({ ...chat, messages: [...chat.messages, chatMsg,
      { role: "tool", tool_call_id: chatMsg.tool_calls[0].id, content: result }] });
    return chatCalls(r);
  });

  const msgs = { model: "tiny", max_tokens: 256, messages: [{ role: "user", content: q }],
    tools: [{ name: fn.name, description: fn.description, input_schema: schema }] };
  const msgCalls = (m) => ({ stop: m.stop_reason, text: m.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
    calls: m.content.filter((b) => b.type === "tool_use").map((b) => ({ id: b.id, type: b.type, name: b.name, args: b.input })) });
  let msgMsg;
  await step("messagesWhole", async () => { msgMsg = await anthropic.messages.create(msgs); return msgCalls(msgMsg); });
  await step("messagesStream", async () => msgCalls(await anthropic.messages.stream(msgs).finalMessage()));
  await step("messagesResult", async () => {
    if (!msgMsg) throw new Error("not tried: the first turn failed");
    return msgCalls(await anthropic.messages.create({ ...msgs, messages: [...msgs.messages,
    { role: "assistant", content: msgMsg.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: msgMsg.content.find((b) => b.type === "tool_use").id, content: result }] }] }));
  });

  const resp = { model: "tiny", max_output_tokens: 256, input: q, tools: [{ type: "function", ...fn }] };
  const respCalls = (r) => ({ stop: r.status, text: r.output_text,
    calls: r.output.filter((i) => i.type === "function_call").map((i) => ({ id: i.call_id, type: i.type, name: i.name, args: JSON.parse(i.arguments) })) });
  let respOut;
  await step("responsesWhole", async () => { const r = await openai.responses.create(resp); respOut = r.output; return respCalls(r); });
  await step("responsesStream", async () => respCalls(await openai.responses.stream(resp).finalResponse()));
  await step("responsesResult", async () => {
    if (!respOut) throw new Error("not tried: the first turn failed");
    const call = respOut.find((i) => i.type === "function_call");
    return respCalls(await openai.responses.create({ ...resp, input: [{ role: "user", content: q }, call,
      { type: "function_call_output", call_id: call.call_id, output: result }] }));
  });
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`

// The official SDKs parse the fleet's tool calls on each API, whole and
// streamed: the tool's name, its arguments as JSON, the finish reason
// tool_calls / stop reason tool_use / a completed response with a
// function_call item; and they send the tool's result back for the
// answer.
func TestSDKToolCalls(t *testing.T) {
	s := startRepliesSite(t, []cannedReply{{Match: "", Reply: "ok"},
		{Match: "weather in Paris", Reply: toolCall("get_weather", map[string]any{"city": "Paris"})},
		{Match: "Sunny", Reply: "It is sunny in Paris."}})
	type call struct {
		ID, Type, Name string
		Args           map[string]any
	}
	type outcome struct {
		Stop, Text, Error string
		Calls             []call
	}
	var got map[string]outcome
	mustUnmarshal(t, npmref.NodeScript(t, sdkTools, "BASE="+s.base), &got)

	wantArgs := map[string]any{"city": "Paris"}
	for what, want := range map[string]struct{ stop, typ string }{
		"chatWhole": {"tool_calls", "function"}, "chatStream": {"tool_calls", "function"},
		"messagesWhole": {"tool_use", "tool_use"}, "messagesStream": {"tool_use", "tool_use"},
		"responsesWhole": {"completed", "function_call"}, "responsesStream": {"completed", "function_call"},
	} {
		o := got[what]
		if o.Error != "" || o.Stop != want.stop || len(o.Calls) != 1 || o.Calls[0].ID == "" || o.Calls[0].Type != want.typ ||
			o.Calls[0].Name != "get_weather" || !reflect.DeepEqual(o.Calls[0].Args, wantArgs) {
			t.Errorf("%s: the SDK got %+v, want one %s call of get_weather %v, stop %q", what, o, want.typ, wantArgs, want.stop)
		}
	}
	for _, what := range []string{"chatResult", "messagesResult", "responsesResult"} {
		if o := got[what]; o.Error != "" || len(o.Calls) != 0 || o.Text != "It is sunny in Paris." {
			t.Errorf("%s: the SDK got %+v after the tool's result, want the text %q", what, o, "It is sunny in Paris.")
		}
	}
}
