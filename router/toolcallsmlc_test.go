package router

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcstack"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// mlcToolCalls runs MLC-LLM's own serving code on tool requests: for each
// case, the conversation template (as MLC's registry has it), the prompt
// process_chat_completion_request renders (check_message_validity,
// check_function_call_usage, the messages, as_prompt), and the finish
// reason and calls process_function_call_output makes of the model's
// output, the way MLC's chat entrypoint gets them (every finish reason
// "tool_calls" while function calling is on).
const mlcToolCalls = `
import json, sys
from mlc_llm.conversation_template import ConvTemplateRegistry
from mlc_llm.protocol.openai_api_protocol import ChatCompletionRequest
from mlc_llm.serve import engine_base

out = []
for c in json.load(sys.stdin):
    conv = ConvTemplateRegistry.get_conv_template(c["template"])
    template = json.loads(conv.model_dump_json(by_alias=True))
    conv = conv.model_copy(deep=True)
    req = ChatCompletionRequest(**c["request"])
    req.check_message_validity()
    req.check_function_call_usage(conv)
    for m in req.messages:
        if m.role == "system":
            conv.system_message = m.content
            continue
        conv.messages.append((m.role, m.content))
    conv.messages.append(("assistant", None))
    prompt = "".join(p for p in conv.as_prompt() if isinstance(p, str))
    finishes = ["tool_calls" if conv.use_function_calling else "stop"]
    texts = [c["output"]]
    _, calls = engine_base.process_function_call_output(texts, finishes)
    out.append({"template": template, "prompt": prompt, "finish": finishes[0],
                "calls": [{"name": t.function.name, "arguments": t.function.arguments} for t in calls[0]]})
json.dump(out, sys.stdout)
`

// For MLC's conversation templates with a {function_string}, the router
// renders the prompt MLC renders, and reads the calls (names and
// arguments) and the finish reason MLC reads out of the same output. Where
// MLC answers an output that is no call with finish_reason "error" (and a
// text of its own), the router answers the text with "stop": the one
// documented difference, besides arguments, which MLC sends as an object
// and the router as OpenAI's JSON string.
func TestToolCallsAsMLC(t *testing.T) {
	st := mlcstack.Setup(t)
	weather := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "the weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}}
	clock := map[string]any{"type": "function", "function": map[string]any{"name": "get_time",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}}}
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	type mlcCase struct {
		Template string         `json:"template"`
		Request  map[string]any `json:"request"`
		Output   string         `json:"output"`
	}
	var cases []mlcCase
	for _, tmpl := range []string{"gorilla", "gorilla-openfunctions-v2"} {
		for _, c := range []struct {
			req    map[string]any
			output string
		}{
			{map[string]any{"messages": []any{user("weather in Paris?")}, "tools": []any{weather}}, `get_weather(city="Paris")`},
			{map[string]any{"messages": []any{user("weather in Paris for 3 days?")}, "tools": []any{weather, clock}, "tool_choice": "auto"}, `get_weather(city='Paris', days=3)`},
			{map[string]any{"messages": []any{user("weather and time?")}, "tools": []any{weather, clock},
				"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}}, `get_time(zone="CET")`},
			{map[string]any{"messages": []any{map[string]any{"role": "system", "content": "be brief"}, user("both?")}, "tools": []any{weather, clock}},
				`["get_weather(city='Lyon')", "get_time(zone='CET')"]`},
			{map[string]any{"messages": []any{user("hello")}, "tools": []any{weather}}, "I do not know."},
			{map[string]any{"messages": []any{user("hello")}, "tools": []any{weather}, "tool_choice": "none"}, `get_weather(city="Paris")`},
		} {
			cases = append(cases, mlcCase{tmpl, c.req, c.output})
		}
	}
	in, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, st.Python, "-c", mlcToolCalls)
	cmd.Env = st.Env(nil)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("MLC's serving code: %v\n%s", err, stderr.Bytes())
	}
	var mlc []struct {
		Template json.RawMessage
		Prompt   string
		Finish   string
		Calls    []struct {
			Name      string
			Arguments map[string]any
		}
	}
	if err := json.Unmarshal(raw, &mlc); err != nil || len(mlc) != len(cases) {
		t.Fatalf("MLC's answers %s: %v", raw, err)
	}
	for i, c := range cases {
		want := mlc[i]
		prompt, tc := routerToolPrompt(t, want.Template, c.Request)
		if prompt != want.Prompt {
			t.Errorf("%s %v: prompt\n%q\nMLC's\n%q", c.Template, c.Request, prompt, want.Prompt)
		}
		got := &recordedCalls{}
		var out sink = got
		if tc != nil {
			out = newToolCallSink(got, tc.Format, 1, nil)
		}
		_ = out.delta(0, c.Output, nil)
		out.finish(0, protocol.FinishStop)
		var calls []map[string]any
		for _, call := range got.calls {
			name, args, _ := bytes.Cut([]byte(call), []byte(" "))
			var a map[string]any
			if err := json.Unmarshal(args, &a); err != nil {
				t.Fatalf("call %s: arguments not JSON: %v", call, err)
			}
			calls = append(calls, map[string]any{"name": string(name), "arguments": a})
		}
		var wantCalls []map[string]any
		for _, call := range want.Calls {
			wantCalls = append(wantCalls, map[string]any{"name": call.Name, "arguments": call.Arguments})
		}
		wantFinish := want.Finish
		if wantFinish == "error" {
			wantFinish = protocol.FinishStop // the documented difference
		}
		if !reflect.DeepEqual(calls, wantCalls) || got.reason != wantFinish {
			t.Errorf("%s %q: calls %v, finish %q; MLC: %v, %q", c.Template, c.Output, calls, got.reason, wantCalls, want.Finish)
		}
	}
}

// routerToolPrompt renders a chat request as the router does, with the
// MLC conversation template template, and returns the prompt and how its
// answer is read for calls.
func routerToolPrompt(t *testing.T, template json.RawMessage, body map[string]any) (string, *protocol.ToolCalling) {
	t.Helper()
	tmpl, err := chat.FromConvTemplate(template)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	var creq protocol.ChatCompletionRequest
	if e := protocol.DecodeJSON(raw, &creq); e != nil {
		t.Fatal(e)
	}
	if e := creq.Validate(); e != nil {
		t.Fatal(e)
	}
	format, err := toolFormatOf(&Config{}, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	d := decoder{Config: &Config{Model: "gorilla"}, chatTmpl: tmpl, toolFormat: format}
	tc := creq.ToolCalling(format)
	opts, e := d.renderOptions(&creq, tc)
	if e != nil {
		t.Fatal(e)
	}
	msgs := make([]chat.Message, len(creq.Messages))
	for i, m := range creq.Messages {
		if err := json.Unmarshal(m, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	prompt, err := tmpl.Render(msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return prompt, tc
}
