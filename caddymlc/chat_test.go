package caddymlc

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A chat completion is the completion of the conversation rendered with the
// model's template, streamed as chat chunks or answered whole.
func TestChatCompletions(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	msgs := []chat.Message{
		{Role: "system", Content: chat.TextContent("you are a kind guide")},
		{Role: "user", Content: chat.TextContent("where does the river go")},
	}
	rendered, err := chat.Tiny().Render(msgs, chat.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tokenizer.ForModel("tiny")
	want := reference(s, s.engines[1], map[string]any{"prompt": tok.Encode(rendered), "max_tokens": 10, "temperature": 0, "stop": chat.Tiny().StopStrings()})

	body := map[string]any{"messages": msgs, "max_tokens": 10, "temperature": 0}
	raw := post(t, s.base+"/v1/chat/completions", body, 200)
	var whole protocol.ChatCompletionResponse
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	if whole.Object != "chat.completion" || whole.Choices[0].Message.Role != "assistant" || whole.Choices[0].Message.Content != want {
		t.Fatalf("whole: %s, want content %q", raw, want)
	}

	body["stream"] = true
	raw = post(t, s.base+"/v1/chat/completions", body, 200)
	chunks, _ := events(t, raw)
	var text, role, finish string
	for _, data := range chunks {
		var c protocol.ChatCompletionChunk
		if err := json.Unmarshal(data, &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
			if ch.Delta.Role != "" {
				role = ch.Delta.Role
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text != want || role != "assistant" || finish == "" {
		t.Fatalf("streamed %q role %q finish %q, want %q", text, role, finish, want)
	}

	for _, bad := range []map[string]any{
		{"messages": []any{}},
		{"messages": []any{map[string]any{"content": "no role"}}},
		{"messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}},
		{"messages": msgs, "response_format": map[string]any{"type": "json_object"}},
	} {
		raw := post(t, s.base+"/v1/chat/completions", bad, 400)
		if !strings.Contains(string(raw), `"invalid_request_error"`) {
			t.Fatalf("%v: %s", bad, raw)
		}
	}
}

func post(t *testing.T, url string, body any, status int) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, raw, status)
	}
	return raw
}
