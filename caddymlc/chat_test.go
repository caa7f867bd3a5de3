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
		{Role: "system", Content: chat.Content{Text: "you are a kind guide"}},
		{Role: "user", Content: chat.Content{Text: "where does the river go"}},
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
				role = string(ch.Delta.Role)
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
		{"messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}},
		{"messages": msgs, "response_format": map[string]any{"type": "xml"}},
		{"messages": msgs, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "array", "contains": map[string]any{}, "maxContains": 2}}}},
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

// The router's chat answer is the built-in engine's own: the router
// renders the conversation and sends the completion, the engine renders
// it the same way (chat.Completion) behind its /v1/chat/completions.
func TestChatIsTheEngineChat(t *testing.T) {
	s := startSite(t, 1, "\t\t\tmode whole\n")
	msgs := []any{map[string]any{"role": "user", "content": "where does the river go"}}
	base := map[string]any{"messages": msgs, "max_tokens": 12, "temperature": 0}
	first := chatText(t, post(t, s.base+"/v1/chat/completions", base, 200))
	stop := strings.Fields(first[0])[2][1:] // starts inside a word: the engines drop its token
	for _, body := range []map[string]any{
		base,
		{"messages": msgs, "max_tokens": 12, "temperature": 0, "n": 2, "stop": stop},
		{"messages": msgs, "max_tokens": 12, "temperature": 0, "stream": true, "stop": []string{"zz", stop}},
	} {
		router := chatText(t, post(t, s.base+"/v1/chat/completions", body, 200))
		engine := chatText(t, post(t, s.engines[0]+"/v1/chat/completions", body, 200))
		if strings.Join(router, "|") != strings.Join(engine, "|") {
			t.Errorf("%v: router %q, engine %q", body, router, engine)
		}
	}
}

// chatText returns the text of each choice of a chat answer, whole or
// streamed.
func chatText(t *testing.T, raw []byte) []string {
	t.Helper()
	var texts []string
	add := func(i int, s string) {
		for len(texts) <= i {
			texts = append(texts, "")
		}
		texts[i] += s
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("data:")) {
		var whole protocol.ChatCompletionResponse
		if err := json.Unmarshal(raw, &whole); err != nil {
			t.Fatal(err)
		}
		for _, c := range whole.Choices {
			add(c.Index, c.Message.Content)
		}
		return texts
	}
	chunks, _ := events(t, raw)
	for _, data := range chunks {
		var c protocol.ChatCompletionChunk
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				add(ch.Index, *ch.Delta.Content)
			}
		}
	}
	return texts
}
