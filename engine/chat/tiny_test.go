package chat

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestTiny(t *testing.T) {
	msgs := []Message{system("be brief."), user("hello there."), assistant("hi."), {Role: "user", Content: PartsContent(textPart("how are "), textPart("you?"))}}
	got, err := Tiny().Render(msgs, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := "system: be brief.\nuser: hello there.\nassistant: hi.\nuser: how are you?\nassistant:"; got != want {
		t.Errorf("Render:\n got %q\nwant %q", got, want)
	}
	got, err = Tiny().Render([]Message{user("x")}, Options{})
	if err != nil || got != "user: x\n" {
		t.Errorf("Render without generation prompt = %q, %v", got, err)
	}
	for _, opts := range []Options{
		{Tools: []json.RawMessage{json.RawMessage(`{}`)}},
		{Vars: map[string]any{"enable_thinking": false}},
	} {
		if _, err := Tiny().Render([]Message{user("x")}, opts); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Render(%+v): err = %v, want ErrUnsupported", opts, err)
		}
	}
	if _, err := Tiny().Render([]Message{{Role: "user", Content: PartsContent(ContentPart{Type: "image_url"})}}, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("image part: err = %v, want ErrUnsupported", err)
	}
	if got := Tiny().StopStrings(); len(got) != 1 || got[0] != "\nuser:" {
		t.Errorf("StopStrings = %q", got)
	}
}

func TestTinyTools(t *testing.T) {
	weather := json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Get the <weather> & more",
		"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}`)
	clock := json.RawMessage(`{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}`)
	call := func(args string) Message {
		return Message{Role: "assistant", Content: Content{Null: true}, ToolCalls: []json.RawMessage{json.RawMessage(
			`{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ` + args + `}}`)}}
	}
	const block = "<tools>\n" +
		`{"type":"function","function":{"name":"get_weather","description":"Get the <weather> & more","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}` + "\n" +
		`{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}` + "\n</tools>\n" +
		`To call a function, answer <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>` + "\n"
	tools := Options{AddGenerationPrompt: true, Tools: []json.RawMessage{weather, clock}}
	for _, tt := range []struct {
		name string
		msgs []Message
		opts Options
		want string
	}{{
		name: "tools without a system message",
		msgs: []Message{user("weather in Paris?")},
		opts: tools,
		want: "system: " + block + "user: weather in Paris?\nassistant:",
	}, {
		name: "tools after the system message",
		msgs: []Message{system("be brief."), user("weather in Paris?")},
		opts: tools,
		want: "system: be brief.\n" + block + "user: weather in Paris?\nassistant:",
	}, {
		name: "a call and its response",
		msgs: []Message{
			system("be brief."), user("weather in Paris?"),
			call(`"{\"city\": \"Paris\",\n \"days\": [1, 2]}"`),
			{Role: "tool", Content: Content{Text: "sunny"}, ToolCallID: "c1"},
			{Role: "system", Content: Content{Text: "a later system turn is a turn."}},
		},
		opts: tools,
		want: "system: be brief.\n" + block + "user: weather in Paris?\n" +
			`assistant: <tool_call>{"name": "get_weather", "arguments": {"city":"Paris","days":[1,2]}}</tool_call>` + "\n" +
			"tool: <tool_response>sunny</tool_response>\nsystem: a later system turn is a turn.\nassistant:",
	}, {
		name: "text and two calls, arguments empty and an object",
		msgs: []Message{{Role: "assistant", Content: Content{Text: "Let me look."}, ToolCalls: []json.RawMessage{
			json.RawMessage(`{"type":"function","function":{"name":"now","arguments":""}}`),
			json.RawMessage(`{"type":"function","function":{"name":"get_weather","arguments":{"city": "Paris"}}}`),
		}}},
		opts: Options{Tools: []json.RawMessage{clock}},
		want: "system: <tools>\n" + `{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}` + "\n</tools>\n" + TinyToolsInstruction + "\n" +
			`assistant: Let me look.<tool_call>{"name": "now", "arguments": {}}</tool_call><tool_call>{"name": "get_weather", "arguments": {"city":"Paris"}}</tool_call>` + "\n",
	}, {
		// Without tools nothing changes: calls are left out, tool
		// turns are plain.
		name: "no tools",
		msgs: []Message{user("weather?"), call(`"{}"`), {Role: "tool", Content: Content{Text: "sunny"}}},
		opts: DefaultOptions(),
		want: "user: weather?\nassistant: \ntool: sunny\nassistant:",
	}} {
		got, err := Tiny().Render(tt.msgs, tt.opts)
		if err != nil || got != tt.want {
			t.Errorf("%s: Render:\n got %q (%v)\nwant %q", tt.name, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name  string
		msgs  []Message
		tools []json.RawMessage
	}{
		{"tool not a function", []Message{user("x")}, []json.RawMessage{json.RawMessage(`{"type":"function"}`)}},
		{"tool not an object", []Message{user("x")}, []json.RawMessage{json.RawMessage(`5`)}},
		{"arguments not JSON", []Message{call(`"{city"`)}, []json.RawMessage{weather}},
		{"arguments not an object", []Message{call(`"[1]"`)}, []json.RawMessage{weather}},
		{"call without a name", []Message{{Role: "assistant", ToolCalls: []json.RawMessage{json.RawMessage(`{"function":{"arguments":"{}"}}`)}}}, []json.RawMessage{weather}},
		{"system parts", []Message{{Role: "system", Content: PartsContent(ContentPart{Type: "image_url"})}}, []json.RawMessage{weather}},
	} {
		if got, err := Tiny().Render(tt.msgs, Options{Tools: tt.tools}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: Render = %q, %v; want ErrUnsupported", tt.name, got, err)
		}
	}
}
