package caddymlc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// With a model directory holding Llama-3's tokenizer.json, the router
// tokenizes string prompts exactly as the engine does (the same text comes
// out whether the engine or the router tokenized), and chat prompts come
// from the directory's Jinja chat template.
func TestLlama3TokenizerModel(t *testing.T) {
	dir := npmref.ModelDir(t, "llama3")
	s := startSiteModel(t, dir, 2, "\t\t\tmode disagg\n")
	for _, prompt := range []string{"Hello, world!", "  leading spaces and ünïcödé — 東京 🚀", "def f(x):\n\treturn x**2\n"} {
		want := reference(s, s.engines[1], greedy(prompt, 12))
		got, status, raw := s.complete(s.base, greedy(prompt, 12))
		if status != 200 || got.Choices[0].Text != want {
			t.Fatalf("%q: %d %s, want %q", prompt, status, raw, want)
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage.PromptTokens != len(tok.Encode(prompt)) {
			t.Fatalf("%q: prompt_tokens %d, want %d", prompt, got.Usage.PromptTokens, len(tok.Encode(prompt)))
		}
	}

	tmpl, err := chat.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: chat.Content{Text: "What is Caddy?"}}}
	rendered, err := tmpl.Render(msgs, chat.DefaultOptions())
	if err != nil || !strings.Contains(rendered, "<|start_header_id|>assistant<|end_header_id|>") {
		t.Fatalf("rendered %q: %v", rendered, err)
	}
	body := map[string]any{"prompt": rendered, "max_tokens": 8, "temperature": 0, "stop": tmpl.StopStrings()}
	want := reference(s, s.engines[1], body)
	raw := post(t, s.base+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 8, "temperature": 0}, 200)
	var resp protocol.ChatCompletionResponse
	if err := json.Unmarshal(raw, &resp); err != nil || resp.Choices[0].Message.Content != want {
		t.Fatalf("chat: %s (%v), want %q", raw, err, want)
	}
}
