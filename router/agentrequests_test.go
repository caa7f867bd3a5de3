package router

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// What agent clients send that the fleet serves rather than refuses:
// Claude Code's system turn inside messages, thinking, a max_tokens above
// the context, server tools; Codex's reasoning, include, store false,
// developer messages after the first turn, its tools the fleet cannot
// run; and a tool's result sent back by previous_response_id.
func TestAgentRequests(t *testing.T) {
	file := filepath.Join(t.TempDir(), "replies.json")
	replies := `[{"match": "weather", "reply": ` + mustMarshal(t, weatherCall) + `}, {"match": "sunny", "reply": "It is sunny in Paris."}]`
	if err := os.WriteFile(file, []byte(replies), 0o644); err != nil {
		t.Fatal(err)
	}
	const context = 1024
	c := startCoreArgs(t, 2, Config{Mode: ModeDisagg}, nil, "--replies", file, "--overrides", "max_total_seq_length=1024")
	msgTool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}
	webSearch := map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}

	t.Run("messages", func(t *testing.T) {
		turns := []map[string]any{{"role": "user", "content": "hi there"}, {"role": "system", "content": "use the tools"},
			{"role": "user", "content": "what is the weather in Paris?"}}
		body := map[string]any{"system": []map[string]any{{"type": "text", "text": "be brief", "cache_control": map[string]any{"type": "ephemeral"}}},
			"messages": turns, "max_tokens": 32000, "tools": []any{msgTool, webSearch}, "thinking": map[string]any{"type": "adaptive", "display": "omitted"},
			"context_management": map[string]any{"edits": []any{}}, "output_config": map[string]any{"effort": "high"}}
		status, raw, header := callJSONHeader(t, c.base+protocol.PathMessages+"?beta=true", body, "anthropic-beta", "claude-code-20250219")
		var m struct {
			Content []struct {
				Type, Text, Name string
				Input            map[string]any
			}
			StopReason string `json:"stop_reason"`
			Usage      protocol.MessagesUsage
		}
		if status != http.StatusOK || json.Unmarshal(raw, &m) != nil || m.StopReason != protocol.StopToolUse || len(m.Content) != 3 ||
			m.Content[1].Type != protocol.BlockToolUse || m.Content[1].Input["city"] != "Paris" {
			t.Fatalf("%d %s", status, raw)
		}
		if got := header.Get(HeaderToolsSkipped); got != "web_search" {
			t.Errorf("%s: %q, want web_search", HeaderToolsSkipped, got)
		}
		// The system turn joins the system prompt: the same prompt as
		// one system prompt of both texts.
		joined := map[string]any{"system": "be brief\n\nuse the tools", "messages": []map[string]any{turns[0], turns[2]}, "tools": []any{msgTool}}
		if n := countTokens(t, c.base, joined); n != m.Usage.InputTokens {
			t.Errorf("count_tokens of the joined system prompt: %d, the request's input_tokens %d", n, m.Usage.InputTokens)
		}
		// max_tokens above the context is capped: a text that does not
		// end by itself ends at the context's end.
		status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathMessages, map[string]any{"messages": []map[string]any{{"role": "user", "content": "tell a tale"}}, "max_tokens": 32000})
		if status != http.StatusOK || json.Unmarshal(raw, &m) != nil || m.StopReason != protocol.StopMaxTokens || m.Usage.InputTokens+m.Usage.OutputTokens != context {
			t.Errorf("capped: %d %s, want stop_reason max_tokens after %d tokens in all", status, raw, context)
		}
	})

	t.Run("responses", func(t *testing.T) {
		base := storingFront(t, c, 0)
		tools := []any{map[string]any{"type": "function", "name": "get_weather", "strict": false, "parameters": map[string]any{"type": "object"}},
			map[string]any{"type": "web_search", "external_web_access": false}, map[string]any{"type": "namespace", "name": "multi_agent_v1", "tools": []any{}}}
		body := map[string]any{"input": []map[string]any{{"type": "message", "role": "developer", "content": []map[string]any{{"type": "input_text", "text": "be brief"}}},
			{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "what is the weather in Paris?"}}}},
			"tools": tools, "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": map[string]any{"summary": "auto", "effort": "high"},
			"include": []string{"reasoning.encrypted_content"}, "prompt_cache_key": "k", "client_metadata": map[string]any{"a": "b"}}
		status, raw, header := callJSONHeader(t, base+protocol.PathResponses, body)
		var r protocol.Response
		if status != http.StatusOK || json.Unmarshal(raw, &r) != nil || r.Status != protocol.ResponseCompleted || len(r.Output) != 3 ||
			r.Output[1].Type != protocol.ItemFunctionCall || r.Output[1].Arguments != `{"city":"Paris"}` {
			t.Fatalf("%d %s", status, raw)
		}
		if got := header.Get(HeaderToolsSkipped); got != "web_search, multi_agent_v1" {
			t.Errorf("%s: %q", HeaderToolsSkipped, got)
		}
		// The tool's result continues the stored conversation.
		next := map[string]any{"previous_response_id": r.ID, "tools": tools[:1], "store": false,
			"input": []map[string]any{{"type": "function_call_output", "call_id": r.Output[1].CallID, "output": "sunny, 21 C"},
				{"type": "function_call_output", "call_id": r.Output[2].CallID, "output": "sunny, 19 C"}}}
		status, raw, _ = callJSONHeader(t, base+protocol.PathResponses, next)
		var r2 protocol.Response
		if status != http.StatusOK || json.Unmarshal(raw, &r2) != nil || len(r2.Output) != 1 || r2.Output[0].Text() != "It is sunny in Paris." || r2.Store {
			t.Fatalf("continued: %d %s", status, raw)
		}
	})
}

// callJSONHeader is callJSON with the answer's header.
func callJSONHeader(t testing.TB, url string, body any, header ...string) (int, []byte, http.Header) {
	t.Helper()
	var h http.Header
	status, raw := callJSONWith(t, http.MethodPost, url, body, func(resp *http.Response) { h = resp.Header }, header...)
	return status, raw, h
}

// countTokens is /v1/messages/count_tokens's input_tokens for body.
func countTokens(t testing.TB, base string, body map[string]any) int {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, base+protocol.PathCountTokens, body)
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &n) != nil || n.InputTokens == 0 {
		t.Fatalf("count_tokens: %d %s", status, raw)
	}
	return n.InputTokens
}

// max_tokens_limit bounds every request, those that ask for no number
// too: without default_max_tokens, a completion, a chat and a response
// that send none end by length at the limit, not at the context's end.
func TestMaxTokensLimitBoundsRequestsWithout(t *testing.T) {
	const limit = 6
	c := startCore(t, 1, Config{Mode: ModeWhole, MaxTokensLimit: limit}, nil)
	prompt := []map[string]any{{"role": "user", "content": "tell a tale"}}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{protocol.PathCompletions, map[string]any{"prompt": "tell a tale", "temperature": 0}},
		{protocol.PathChatCompletions, map[string]any{"messages": prompt, "temperature": 0}},
		{protocol.PathResponses, map[string]any{"input": "tell a tale", "temperature": 0, "store": false}},
	} {
		status, raw := callJSON(t, http.MethodPost, c.base+tc.path, tc.body)
		var out struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
				OutputTokens     int `json:"output_tokens"`
			} `json:"usage"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("%s: %d %s", tc.path, status, raw)
		}
		if n := max(out.Usage.CompletionTokens, out.Usage.OutputTokens); n != limit {
			t.Errorf("%s without max_tokens: %d tokens, want the limit, %d", tc.path, n, limit)
		}
	}
}

// A model's output bounds: default_max_tokens for a request that sends
// none, max_tokens_limit capping a larger ask (or refusing it under
// refuse), both shown in the status.
func TestMaxTokensBounds(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		c := startCore(t, 1, Config{Mode: ModeWhole, DefaultMaxTokens: 5, MaxTokensLimit: 8, RefuseMaxTokens: refuse}, nil)
		if st := c.r.Status(); st.DefaultMaxTokens != 5 || st.MaxTokensLimit != 8 || st.Context == 0 {
			t.Fatalf("status %+v", st)
		}
		prompt := []map[string]any{{"role": "user", "content": "tell a tale"}}
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, map[string]any{"messages": prompt})
		var out protocol.ChatCompletionResponse
		if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Usage.CompletionTokens != 5 || deref(out.Choices[0].FinishReason) != protocol.FinishLength {
			t.Errorf("refuse %v, no max_tokens: %d %s, want 5 tokens, length", refuse, status, raw)
		}
		status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, map[string]any{"messages": prompt, "max_tokens": 100})
		var e protocol.ErrorBody
		switch {
		case !refuse && (status != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Usage.CompletionTokens != 8):
			t.Errorf("max_tokens 100 capped: %d %s, want 8 tokens", status, raw)
		case refuse && (status != http.StatusBadRequest || json.Unmarshal(raw, &e) != nil || deref(e.Error.Param) != "max_tokens"):
			t.Errorf("max_tokens 100 refused: %d %s, want a 400 naming max_tokens", status, raw)
		}
	}
}
