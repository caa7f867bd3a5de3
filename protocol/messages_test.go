package protocol

import (
	"encoding/json"
	"testing"
)

// A Messages request becomes the chat request of the same conversation:
// the system prompt first (blocks joined), a user turn's blocks as text
// parts, an assistant turn's joined, the sampling fields carried.
func TestMessagesChat(t *testing.T) {
	var r MessagesRequest
	if e := DecodeJSON([]byte(`{"model":"m","max_tokens":7,"temperature":0.5,"top_p":0.9,"stop_sequences":["END"],"stream":true,
		"metadata":{"user_id":"u1"},"system":[{"type":"text","text":"Be "},{"type":"text","text":"brief."}],
		"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]},
			{"role":"assistant","content":[{"type":"text","text":"c"},{"type":"text","text":"d"}]},{"role":"user","content":"e"}]}`), &r); e != nil {
		t.Fatal(e)
	}
	creq, e := r.Chat()
	if e != nil {
		t.Fatal(e)
	}
	msgs, _ := json.Marshal(creq.Messages)
	const want = `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"text":"a","type":"text"},{"text":"b","type":"text"}]},` +
		`{"role":"assistant","content":"cd"},{"role":"user","content":"e"}]`
	if string(msgs) != want || *creq.MaxTokens != 7 || *creq.Temperature != 0.5 || *creq.TopP != 0.9 || !creq.Stream ||
		len(creq.Stop) != 1 || creq.Stop[0] != "END" || creq.User != nil || *creq.PromptCacheKey != "u1" {
		t.Fatalf("%s\n%+v", msgs, creq)
	}
}

// An error of the shared path keeps its status in Anthropic's shape, its
// type the one Anthropic gives that status, the parameter in front of the
// message.
func TestAnthropicErrors(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large",
		429: "rate_limit_error", 503: "overloaded_error", 500: "api_error", 502: "api_error", 408: "timeout_error"} {
		if got := Errorf(status, ErrTypeServer, "x").Anthropic(); got.Type != "error" || got.Error.Type != typ {
			t.Errorf("%d: %+v, want %s", status, got, typ)
		}
	}
	if got := InvalidRequest("top_k", "not supported").Anthropic(); got.Error.Message != "top_k: not supported" {
		t.Errorf("param: %q", got.Error.Message)
	}
	if got := InvalidRequest("top_k", "top_k is not supported").Anthropic(); got.Error.Message != "top_k is not supported" {
		t.Errorf("param named already: %q", got.Error.Message)
	}
}

// A Messages request's metadata.user_id keys its routing by the session
// it names: Claude Code's JSON object (its account and device are not
// the conversation), its earlier _session_ string, or any other value
// whole.
func TestSessionOfUserID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{`{"device_id":"d1","account_uuid":"acc-1","session_id":"5e1c-7f"}`, "5e1c-7f"},
		{"user_abc123_account_acc-1_session_5e1c-7f", "5e1c-7f"},
		{"opaque-user-42", "opaque-user-42"},
		{`{"device_id":"d1"}`, `{"device_id":"d1"}`},
		{"trailing_session_", "trailing_session_"},
	} {
		if got := sessionOfUserID(tc.id); got != tc.want {
			t.Errorf("sessionOfUserID(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
