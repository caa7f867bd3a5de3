package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A conversation through /v1/messages, whole and streamed, is answered
// with the text the chat completion of the same conversation has
// (greedy), its stop reason and usage; the stream is Anthropic's event
// sequence, each event's data typed as its name.
func TestMessagesEqualChat(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	chat := []map[string]any{
		{"role": "system", "content": "You answer in one line."},
		{"role": "user", "content": "the cat sat on"},
		{"role": "assistant", "content": "the mat"},
		{"role": "user", "content": "and the dog?"},
	}
	// The same turns, the system prompt as blocks and a user turn as two
	// text blocks (which chat renders as the parts of one turn).
	messages := []map[string]any{
		{"role": "user", "content": "the cat sat on"},
		{"role": "assistant", "content": "the mat"},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "and the "}, {"type": "text", "text": "dog?"}}},
	}
	system := []map[string]any{{"type": "text", "text": "You answer in one line."}}
	for _, tc := range []struct {
		maxTokens int
		stop      []string
		reason    string
	}{{3, nil, "max_tokens"}, {40, []string{"metal", "mass"}, "end_turn"}} {
		maxTokens := tc.maxTokens
		want, finish, usage := chatAnswer(t, c.base, chat, maxTokens, tc.stop...)
		reason := map[string]string{"stop": "end_turn", "length": "max_tokens"}[finish]
		if want == "" || reason != tc.reason {
			t.Fatalf("chat: %q, finish %q", want, finish)
		}
		body := map[string]any{"model": "tiny", "system": system, "messages": messages, "max_tokens": maxTokens, "temperature": 0, "stop_sequences": tc.stop}
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathMessages, body)
		var whole protocol.MessagesResponse
		if status != http.StatusOK || json.Unmarshal(raw, &whole) != nil {
			t.Fatalf("whole: %d %s", status, raw)
		}
		if !strings.HasPrefix(whole.ID, "msg_") || whole.Type != "message" || whole.Role != "assistant" || whole.Model != "tiny" ||
			len(whole.Content) != 1 || whole.Content[0].Type != "text" || whole.Content[0].Text != want ||
			deref(whole.StopReason) != reason || whole.StopSequence != nil ||
			whole.Usage != (protocol.MessagesUsage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens}) {
			t.Fatalf("max_tokens %d: whole %s, want text %q, stop_reason %s, usage %+v", maxTokens, raw, want, reason, usage)
		}

		body["stream"] = true
		status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathMessages, body)
		if status != http.StatusOK {
			t.Fatalf("stream: %d %s", status, raw)
		}
		events := namedEvents(t, raw)
		var names []string
		var text strings.Builder
		for _, e := range events {
			var typed struct {
				Type  string
				Index int
				Delta struct {
					Type, Text string
					StopReason string `json:"stop_reason"`
				}
				Usage   protocol.MessagesUsage
				Message protocol.MessagesResponse
			}
			if err := json.Unmarshal(e.data, &typed); err != nil || typed.Type != e.name {
				t.Fatalf("event %q: %s", e.name, e.data)
			}
			if n := len(names); n == 0 || names[n-1] != e.name || e.name != protocol.EventContentBlockDelta {
				names = append(names, e.name)
			}
			switch e.name {
			case protocol.EventMessageStart:
				m := typed.Message
				if m.ID == "" || m.Role != "assistant" || len(m.Content) != 0 || m.StopReason != nil || m.Usage.InputTokens != usage.PromptTokens {
					t.Errorf("message_start: %s", e.data)
				}
			case protocol.EventContentBlockDelta:
				if typed.Delta.Type != "text_delta" || typed.Index != 0 {
					t.Errorf("delta: %s", e.data)
				}
				text.WriteString(typed.Delta.Text)
			case protocol.EventMessageDelta:
				if typed.Delta.StopReason != reason || typed.Usage.OutputTokens != usage.CompletionTokens {
					t.Errorf("message_delta: %s, want %s and %d output tokens", e.data, reason, usage.CompletionTokens)
				}
			}
		}
		wantNames := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if !slices.Equal(names, wantNames) {
			t.Fatalf("events %v, want %v", names, wantNames)
		}
		if text.String() != want {
			t.Fatalf("max_tokens %d: streamed %q, chat %q", maxTokens, text.String(), want)
		}
	}
}

// What the Messages API cannot serve, and what the shared path refuses,
// is answered in Anthropic's shape with the matching status, the
// parameter named in the message.
func TestMessagesErrors(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, RefuseMaxTokens: true}, nil)
	user := []map[string]any{{"role": "user", "content": "hi"}}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		typ    string
		in     string // in the message
	}{
		{"no max_tokens", map[string]any{"messages": user}, 400, "invalid_request_error", "max_tokens"},
		{"image", map[string]any{"max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "AA=="}}}}}},
			400, "invalid_request_error", "messages[0].content[0].type"},
		{"tool_choice", map[string]any{"max_tokens": 4, "messages": user, "tools": []map[string]any{{"name": "f", "input_schema": map[string]any{"type": "object"}}},
			"tool_choice": map[string]any{"type": "tool", "name": "g"}}, 400, "invalid_request_error", "tool_choice.name"},
		{"tool_result in an assistant turn", map[string]any{"max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": "hi"},
			{"role": "assistant", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "t", "content": "x"}}}, {"role": "user", "content": "go"}}},
			400, "invalid_request_error", "messages[1].content[0].type"},
		{"top_k", map[string]any{"max_tokens": 4, "messages": user, "top_k": 5}, 400, "invalid_request_error", "top_k"},
		{"temperature", map[string]any{"max_tokens": 4, "messages": user, "temperature": 1.5}, 400, "invalid_request_error", "temperature"},
		{"prefill", map[string]any{"max_tokens": 4, "messages": append(slices.Clone(user), map[string]any{"role": "assistant", "content": "the"})},
			400, "invalid_request_error", "messages[1].role"},
		{"role", map[string]any{"max_tokens": 4, "messages": []map[string]any{{"role": "wizard", "content": "x"}}}, 400, "invalid_request_error", "messages[0].role"},
		{"system only", map[string]any{"max_tokens": 4, "messages": []map[string]any{{"role": "system", "content": "x"}}}, 400, "invalid_request_error", "messages"},
		{"model", map[string]any{"model": "claude-sonnet-4", "max_tokens": 4, "messages": user}, 404, "not_found_error", "claude-sonnet-4"},
		{"context", map[string]any{"max_tokens": 1 << 30, "messages": user, "stream": true}, 400, "invalid_request_error", "context"},
	} {
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathMessages, tc.body)
		var got protocol.AnthropicErrorBody
		if err := json.Unmarshal(raw, &got); err != nil || status != tc.status || got.Type != "error" || got.Error.Type != tc.typ ||
			!strings.Contains(got.Error.Message, tc.in) {
			t.Errorf("%s: %d %s, want %d %s naming %q", tc.name, status, raw, tc.status, tc.typ, tc.in)
		}
	}
}

// The sinks answer the errors of the shared path in Anthropic's shape: a
// 503 before any text is an overloaded_error with its Retry-After, a 429
// a rate_limit_error; an error after the stream began is its last event.
func TestMessagesSinkErrors(t *testing.T) {
	unavailable := protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable, "no engine is ready")
	unavailable.RetryAfter = 2 * time.Second
	limited := protocol.Errorf(http.StatusTooManyRequests, protocol.ErrTypeInvalidRequest, "over budget")
	req := &protocol.CompletionRequest{Prompt: protocol.TokenPrompt([]int{1, 2})}
	for _, tc := range []struct {
		err    *protocol.Error
		stream bool
		typ    string
	}{{unavailable, false, "overloaded_error"}, {unavailable, true, "overloaded_error"}, {limited, true, "rate_limit_error"}} {
		w := httptest.NewRecorder()
		req.Stream = tc.stream
		messagesSink(w, "msg_1", "tiny", req).fail(tc.err)
		var got protocol.AnthropicErrorBody
		if w.Code != tc.err.Status || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Type != "error" || got.Error.Type != tc.typ ||
			got.Error.Message != tc.err.Message || (tc.err.RetryAfter > 0) != (w.Header().Get("Retry-After") == "2") {
			t.Errorf("%d, stream %v: %d %v %s", tc.err.Status, tc.stream, w.Code, w.Header(), w.Body)
		}
	}
	w := httptest.NewRecorder()
	req.Stream = true
	s := messagesSink(w, "msg_1", "tiny", req)
	if err := s.delta(0, "hello", nil); err != nil {
		t.Fatal(err)
	}
	s.fail(protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "the engines failed"))
	events := namedEvents(t, w.Body.Bytes())
	last := events[len(events)-1]
	var got protocol.AnthropicErrorBody
	if w.Code != http.StatusOK || last.name != "error" || json.Unmarshal(last.data, &got) != nil || got.Error.Type != "api_error" {
		t.Fatalf("%d: %s", w.Code, w.Body)
	}
}
