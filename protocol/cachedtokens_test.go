package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cached tokens of an engine's usage: the built-in engine's
// prefix_matched_length, else MLC's per-request metrics (prompt_tokens
// less prefill_tokens), else unknown.
func TestCachedTokensOfUsage(t *testing.T) {
	for _, tc := range []struct {
		usage string
		want  int
		ok    bool
	}{
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"extra":{"prefix_matched_length":64}}`, 64, true},
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"extra":{"prefill_tokens":36,"decode_tokens":1}}`, 64, true},
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"extra":{"prefill_tokens":36.0}}`, 64, true},
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"extra":{"prefill_tokens":140}}`, 0, true}, // prefilled again after a preemption
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"extra":{"prefill_tokens":36.5}}`, 0, false},
		{`{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101}`, 0, false},
	} {
		var u Usage
		if err := json.Unmarshal([]byte(tc.usage), &u); err != nil {
			t.Fatal(err)
		}
		if n, ok := CachedTokensOf(&u); n != tc.want || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.usage, n, ok, tc.want, tc.ok)
		}
	}
	if _, ok := CachedTokensOf(nil); ok {
		t.Error("no usage, yet a count")
	}
}

// Each API's usage says what was cached as its clients read it: chat's
// and completions' prompt_tokens_details (left out when unknown), the
// Responses API's input_tokens_details, and Anthropic's split of the
// prompt into input_tokens and cache_read_input_tokens.
func TestCachedTokensInEveryAPIsUsage(t *testing.T) {
	u := Usage{PromptTokens: 100, CompletionTokens: 7, TotalTokens: 107}
	for _, enc := range []func(Usage) ([]byte, error){
		func(u Usage) ([]byte, error) { return json.Marshal(u) },
		func(u Usage) ([]byte, error) { return CompletionResponse{Usage: &u}.AppendJSON(nil) },
	} {
		b, err := enc(u.WithCached(64))
		if err != nil || !strings.Contains(string(b), `"prompt_tokens_details":{"cached_tokens":64}`) {
			t.Errorf("%s %v", b, err)
		}
		b, _ = enc(u.WithCached(-1))
		if strings.Contains(string(b), "prompt_tokens_details") {
			t.Errorf("unknown, yet %s", b)
		}
	}
	if got := u.WithCached(500).Cached(); got != 100 {
		t.Errorf("%d cached of a prompt of 100", got)
	}
	if r := NewResponseUsage(u.WithCached(64)); r.InputTokens != 100 || r.InputTokensDetails.CachedTokens != 64 {
		t.Errorf("responses usage %+v", r)
	}
	m := NewMessagesUsage(u.WithCached(64))
	b, _ := json.Marshal(m)
	if m.InputTokens+m.CacheReadInputTokens != 100 || string(b) != `{"input_tokens":36,"cache_creation_input_tokens":0,"cache_read_input_tokens":64,"output_tokens":7}` {
		t.Errorf("messages usage %s", b)
	}
}
