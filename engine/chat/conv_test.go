package chat

import (
	"encoding/json"
	"errors"
	"testing"
)

// Conversation templates as mlc-chat-config.json stores them
// (Conversation.to_json_dict), copied from the registry entries of MLC's
// python/mlc_llm/conversation_template/{llama,qwen2,gemma,gorrilla}.py.
const (
	llama3Conv = `{
  "name": "llama-3",
  "system_template": "<|start_header_id|>system<|end_header_id|>\n\n{system_message}<|eot_id|>",
  "system_message": "You are a helpful, respectful and honest assistant.",
  "roles": {"user": "<|start_header_id|>user", "assistant": "<|start_header_id|>assistant"},
  "seps": ["<|eot_id|>"],
  "role_content_sep": "<|end_header_id|>\n\n",
  "role_empty_sep": "<|end_header_id|>\n\n",
  "stop_str": ["<|end_of_text|>", "<|eot_id|>"],
  "stop_token_ids": [128001, 128009],
  "system_prefix_token_ids": [128000],
  "add_role_after_system_message": true,
  "messages": [],
  "function_string": "",
  "use_function_calling": false
}`
	llama2Conv = `{
  "name": "llama-2",
  "system_template": "[INST] <<SYS>>\n{system_message}\n<</SYS>>\n\n",
  "system_message": "You are a helpful, respectful and honest assistant.",
  "roles": {"user": "<s>[INST]", "assistant": "[/INST]", "tool": "[INST]"},
  "seps": [" ", " </s>"],
  "role_content_sep": " ",
  "role_empty_sep": " ",
  "stop_str": ["[INST]"],
  "stop_token_ids": [2],
  "system_prefix_token_ids": [1],
  "add_role_after_system_message": false
}`
	qwen2Conv = `{
  "name": "qwen2",
  "system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
  "system_message": "You are a helpful assistant.",
  "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
  "seps": ["<|im_end|>\n"],
  "role_content_sep": "\n",
  "role_empty_sep": "\n",
  "stop_str": ["<|endoftext|>, <|im_end|>"],
  "stop_token_ids": [151643, 151645]
}`
	gemmaConv = `{
  "name": "gemma_instruction",
  "system_template": "<bos>{system_message}",
  "system_message": "",
  "roles": {"user": "<start_of_turn>user", "assistant": "<start_of_turn>model"},
  "seps": ["<end_of_turn>\n"],
  "role_content_sep": "\n",
  "role_empty_sep": "\n",
  "stop_str": ["<end_of_turn>"],
  "stop_token_ids": [1, 107],
  "system_prefix_token_ids": [2]
}`
	gorillaConv = `{
  "name": "gorilla",
  "system_template": "{system_message}",
  "system_message": "A chat between a curious user and an artificial intelligence assistant. The assistant provides helpful, detailed, and polite responses to the user's inquiries.",
  "role_templates": {"user": "<<question>> {user_message} <<function>> {function_string}"},
  "roles": {"user": "USER", "assistant": "ASSISTANT", "tool": "USER"},
  "seps": ["\n", "</s>"],
  "role_content_sep": ": ",
  "role_empty_sep": ":",
  "stop_str": ["</s>"],
  "stop_token_ids": [2],
  "system_prefix_token_ids": [1]
}`
)

func user(s string) Message         { return Message{Role: "user", Content: Content{Text: s}} }
func assistant(s string) Message    { return Message{Role: "assistant", Content: Content{Text: s}} }
func system(s string) Message       { return Message{Role: "system", Content: Content{Text: s}} }
func textPart(s string) ContentPart { return ContentPart{Type: "text", Text: s} }

func mustConv(t *testing.T, src string) Template {
	t.Helper()
	tmpl, err := FromConvTemplate(json.RawMessage(src))
	if err != nil {
		t.Fatalf("FromConvTemplate: %v", err)
	}
	return tmpl
}

// The expected prompts below were worked out by hand from
// process_chat_completion_request and Conversation.as_prompt.
func TestConversationRender(t *testing.T) {
	const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Wetter in Köln","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	const weatherFunctions = `[{"description": "Wetter in K\u00f6ln", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]`
	const gorillaSystem = "A chat between a curious user and an artificial intelligence assistant. The assistant provides helpful, detailed, and polite responses to the user's inquiries."
	tests := []struct {
		name string
		conv string
		msgs []Message
		opts Options
		want string
	}{{
		name: "llama-3 default system",
		conv: llama3Conv,
		msgs: []Message{user("Hello")},
		opts: DefaultOptions(),
		want: "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful, respectful and honest assistant.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
	}, {
		name: "llama-3 multi-turn with system",
		conv: llama3Conv,
		msgs: []Message{system("Be brief."), user("Hi"), assistant("Hello!"), user("Bye")},
		opts: DefaultOptions(),
		want: "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
	}, {
		name: "llama-3 empty system removes nothing but the message",
		conv: llama3Conv,
		msgs: []Message{system(""), user("Hi")},
		opts: Options{},
		want: "<|start_header_id|>system<|end_header_id|>\n\n<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
	}, {
		name: "llama-2 no role after system, two separators",
		conv: llama2Conv,
		msgs: []Message{user("Hi"), assistant("Hello"), user("Bye")},
		opts: DefaultOptions(),
		want: "[INST] <<SYS>>\nYou are a helpful, respectful and honest assistant.\n<</SYS>>\n\n" +
			"Hi [/INST] Hello </s><s>[INST] Bye [/INST] ",
	}, {
		name: "qwen2 text parts are concatenated",
		conv: qwen2Conv,
		msgs: []Message{{Role: "user", Content: PartsContent(textPart("Hello "), textPart("wörld"))}},
		opts: DefaultOptions(),
		want: "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
			"<|im_start|>user\nHello wörld<|im_end|>\n" +
			"<|im_start|>assistant\n",
	}, {
		name: "qwen2 null content renders role_empty_sep",
		conv: qwen2Conv,
		msgs: []Message{user("a"), {Role: "assistant", Content: Content{Null: true}}, user("b")},
		opts: DefaultOptions(),
		want: "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
			"<|im_start|>user\na<|im_end|>\n" +
			"<|im_start|>assistant\n" +
			"<|im_start|>user\nb<|im_end|>\n" +
			"<|im_start|>assistant\n",
	}, {
		name: "gemma empty system message",
		conv: gemmaConv,
		msgs: []Message{user("Hi")},
		opts: DefaultOptions(),
		want: "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
	}, {
		name: "gorilla without tools drops the placeholder",
		conv: gorillaConv,
		msgs: []Message{user("a"), assistant("b"), user("c")},
		opts: DefaultOptions(),
		want: gorillaSystem + "USER: <<question>> a <<function>> \nASSISTANT: b</s>USER: <<question>> c <<function>> \nASSISTANT:",
	}, {
		name: "gorilla tools fill the last placeholder",
		conv: gorillaConv,
		msgs: []Message{user("a"), assistant("b"), user("c")},
		opts: Options{AddGenerationPrompt: true, Tools: []json.RawMessage{json.RawMessage(weatherTool)}},
		want: gorillaSystem + "USER: <<question>> a <<function>> \nASSISTANT: b</s>USER: <<question>> c <<function>> " +
			weatherFunctions + "\nASSISTANT:",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustConv(t, tt.conv).Render(tt.msgs, tt.opts)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestConversationUnsupported(t *testing.T) {
	tool := json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{}}}`)
	tests := []struct {
		name string
		conv string
		msgs []Message
		opts Options
	}{
		{"tools without placeholder", llama3Conv, []Message{user("x")}, Options{Tools: []json.RawMessage{tool}}},
		{"unknown role", llama3Conv, []Message{{Role: "tool", Content: Content{Text: "x"}}}, Options{}},
		{"late system message", llama3Conv, []Message{user("x"), system("y")}, Options{}},
		{"parts on assistant", llama3Conv, []Message{{Role: "assistant", Content: PartsContent(textPart("x"))}}, Options{}},
		{"image part", llama3Conv, []Message{{Role: "user", Content: PartsContent(ContentPart{Type: "image_url"})}}, Options{}},
		{"tool calls", llama3Conv, []Message{{Role: "assistant", ToolCalls: []json.RawMessage{json.RawMessage(`{}`)}}}, Options{}},
		{"variables", llama3Conv, []Message{user("x")}, Options{Vars: map[string]any{"enable_thinking": false}}},
		{"tool of another type", gorillaConv, []Message{user("x")}, Options{Tools: []json.RawMessage{json.RawMessage(`{"type":"retrieval"}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mustConv(t, tt.conv).Render(tt.msgs, tt.opts)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Render error = %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestConversationTokenIDs(t *testing.T) {
	tmpl, ok := mustConv(t, llama3Conv).(TokenIDTemplate)
	if !ok {
		t.Fatal("conversation template is not a TokenIDTemplate")
	}
	if got := tmpl.PrefixTokenIDs(); len(got) != 1 || got[0] != 128000 {
		t.Errorf("PrefixTokenIDs = %v, want [128000]", got)
	}
	if got := tmpl.StopTokenIDs(); len(got) != 2 || got[1] != 128009 {
		t.Errorf("StopTokenIDs = %v, want [128001 128009]", got)
	}
	if got := tmpl.StopStrings(); len(got) != 2 || got[1] != "<|eot_id|>" {
		t.Errorf("StopStrings = %q", got)
	}
}

func TestFromConvTemplateInvalid(t *testing.T) {
	for _, src := range []string{
		`{"seps": ["x"]}`,
		`{"roles": {"user": "u"}}`,
		`{"roles": {"user": "u"}, "seps": ["a", "b", "c"]}`,
		`{"roles": {"user": "u"}, "seps": ["a"], "messages": [["user"]]}`,
		`[]`,
	} {
		if _, err := FromConvTemplate(json.RawMessage(src)); err == nil {
			t.Errorf("FromConvTemplate(%s) succeeded, want an error", src)
		}
	}
}

func TestConversationPresetMessages(t *testing.T) {
	// A template with preset history: the request's messages follow it,
	// and add_role_after_system_message=false only affects messages[0].
	const conv = `{"name": "x", "system_template": "S:{system_message}|", "system_message": "sys",
		"roles": {"user": "U", "assistant": "A"}, "seps": [";"], "role_content_sep": "=", "role_empty_sep": "=",
		"add_role_after_system_message": false,
		"messages": [["user", "hi"], ["assistant", "yo"]]}`
	got, err := mustConv(t, conv).Render([]Message{user("q")}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := "S:sys|hi;A=yo;U=q;A="; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}
