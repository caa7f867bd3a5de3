package chat_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
)

func ExampleTiny() {
	var msgs []chat.Message
	_ = json.Unmarshal([]byte(`[
		{"role": "system", "content": "be brief."},
		{"role": "user", "content": [{"type": "text", "text": "hello there."}]}
	]`), &msgs)
	prompt, err := chat.Tiny().Render(msgs, chat.DefaultOptions())
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", prompt)
	// Output: "system: be brief.\nuser: hello there.\nassistant:"
}

func ExampleFromJinja() {
	tmpl, err := chat.FromJinja(
		"{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"+
			"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
		map[string]any{"bos_token": "<s>"})
	if err != nil {
		panic(err)
	}
	msgs := []chat.Message{{Role: "user", Content: chat.Content{Text: "Hi"}}}
	prompt, err := tmpl.Render(msgs, chat.DefaultOptions())
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", prompt)
	fmt.Println(tmpl.StopStrings())

	// This template never reads tools, so a request with tools is refused.
	_, err = tmpl.Render(msgs, chat.Options{Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}})
	fmt.Println(errors.Is(err, chat.ErrUnsupported))
	// Output:
	// "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	// [<|im_end|>]
	// true
}
