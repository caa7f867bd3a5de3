package router

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// postRaw posts body to path on base and returns the status and the raw
// answer.
func postRaw(t *testing.T, base, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// A stream that waits for a long prefill sends keep-alives: SSE comments
// for completions, ping events after message_start for messages; its
// text is the same as without them.
func TestKeepAliveWhilePrefilling(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: 300, KeepAlive: 200 * time.Millisecond}, nil)
	prompt := longPromptIDs(1200)
	want := c.complete(c.base, greedy(prompt, 8))
	slow(t, c.engines[0], time.Millisecond, 0)
	status, raw, text := postStream(t, c.base, greedy(prompt, 8))
	if status != http.StatusOK || text != want {
		t.Fatalf("status %d, text %q, want %q", status, text, want)
	}
	if n := strings.Count(raw, ": keep-alive\n\n"); n < 2 {
		t.Errorf("%d keep-alives in a stream that waited over a second for its first token: %s", n, raw)
	}
	if i := strings.Index(raw, "data: "); i < 0 || strings.Count(raw[i:], ": keep-alive") > 0 {
		t.Errorf("keep-alives after the first token, which did not wait: %s", raw)
	}

	long := strings.Repeat("the slow river carries the boats to the sea ", 120)
	status, raw = postRaw(t, c.base, "/v1/messages", map[string]any{"model": "tiny", "max_tokens": 4, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": long}}})
	start, ping := strings.Index(raw, "event: message_start"), strings.Index(raw, "event: ping")
	if status != http.StatusOK || start < 0 || ping < start || strings.Count(raw, "event: ping") < 3 || !strings.Contains(raw, "event: message_stop") {
		t.Errorf("messages: status %d, want message_start, then pings while waiting, then the message: %s", status, raw)
	}
}

// request_timeout ends a request that runs past it with a 504 in its
// API's shape.
func TestRequestTimeout(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: 100, RequestTimeout: 700 * time.Millisecond}, nil)
	slow(t, c.engines[0], 2*time.Millisecond, 0)
	status, raw, _ := postStream(t, c.base, greedy(longPromptIDs(1000), 8))
	var body protocol.ErrorBody
	if status != http.StatusGatewayTimeout || json.Unmarshal([]byte(raw), &body) != nil || body.Error == nil ||
		body.Error.Code == nil || *body.Error.Code != codeRequestTimeout {
		t.Errorf("completions: status %d: %s; want 504 request_timeout", status, raw)
	}
	long := strings.Repeat("the slow river carries the boats to the sea ", 100)
	status, raw = postRaw(t, c.base, "/v1/messages", map[string]any{"model": "tiny", "max_tokens": 4,
		"messages": []map[string]any{{"role": "user", "content": long}}})
	if status != http.StatusGatewayTimeout || !strings.Contains(raw, `"type":"error"`) || !strings.Contains(raw, "request_timeout") {
		t.Errorf("messages: status %d: %s; want Anthropic's error shape, 504", status, raw)
	}
	for _, u := range c.r.candidates("") {
		if f, _ := u.breaker.badness(); f != 0 {
			t.Errorf("engine %s blamed for a request's own timeout: %d failures", u.addr, f)
		}
	}
}

// A stream waiting in the router's queue for its turn at the engines
// sends keep-alives too, and its text is the same; when the queue gives
// up on it after a keep-alive opened the stream, the error is the
// stream's last event.
func TestKeepAliveWhileQueued(t *testing.T) {
	for _, tc := range []struct {
		name         string
		queueTimeout time.Duration
	}{{"admitted", time.Minute}, {"queue timeout", 600 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCore(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: 100, KeepAlive: 150 * time.Millisecond,
				MaxInflight: 1, QueueTimeout: tc.queueTimeout}, nil)
			short := greedy("the quick brown fox", 4)
			want := c.complete(c.base, short)
			slow(t, c.engines[0], 2*time.Millisecond, 0) // the long prompt holds the one slot 2 s and more
			done := make(chan int, 1)
			go func() {
				status, _, _ := postStream(t, c.base, greedy(longPromptIDs(1000), 4))
				done <- status
			}()
			deadline := time.Now().Add(time.Minute)
			for c.r.candidates("")[0].inflight.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the long prompt reached no engine")
				}
				time.Sleep(5 * time.Millisecond)
			}
			status, raw, text := postStream(t, c.base, short)
			first := strings.Index(raw, "data: ")
			if status != http.StatusOK || first < 0 || strings.Count(raw[:first], ": keep-alive\n\n") < 2 {
				t.Fatalf("status %d; want 200 and keep-alives while queued, before any event: %s", status, raw)
			}
			if tc.queueTimeout == time.Minute {
				if text != want {
					t.Errorf("text %q after the queue, want %q", text, want)
				}
			} else {
				if !strings.HasPrefix(raw[first:], `data: {"error"`) || strings.Contains(raw, "[DONE]") || text != "" {
					t.Errorf("a queue timeout after keep-alives: want the error as the stream's only event: %s", raw)
				}
				// Messages: message_start and pings, then Anthropic's error event.
				status, raw := postRaw(t, c.base, "/v1/messages", map[string]any{"model": "tiny", "max_tokens": 4, "stream": true,
					"messages": []map[string]any{{"role": "user", "content": "the quick brown fox"}}})
				start, ping, fail := strings.Index(raw, "event: message_start"), strings.Index(raw, "event: ping"), strings.Index(raw, "event: error")
				if status != http.StatusOK || start < 0 || ping < start || fail < ping || strings.Contains(raw, "message_stop") {
					t.Errorf("messages: status %d; want message_start, pings, then an error event: %s", status, raw)
				}
			}
			if s := <-done; s != http.StatusOK {
				t.Errorf("the long prompt: %d", s)
			}
		})
	}
}

// A tool call the parser holds back until it is whole is silence to the
// client: keep-alives flow while it is held (an SSE comment for chat, a
// ping for messages), between the text before the call and the call;
// the answer is the same.
func TestKeepAliveWhileACallIsHeld(t *testing.T) {
	file := filepath.Join(t.TempDir(), "replies.json")
	replies := `[{"match": "weather", "reply": ` + mustMarshal(t, weatherCall) + `}]`
	if err := os.WriteFile(file, []byte(replies), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each decode step 20 ms: the first call's ~40 tokens are held for
	// most of a second, many keep-alive intervals.
	c := startCoreArgs(t, 1, Config{Mode: ModeWhole, KeepAlive: 100 * time.Millisecond}, nil, "--replies", file, "--decode-delay", "20ms")
	q := []map[string]any{{"role": "user", "content": "what is the weather in Paris?"}}
	msgTool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}
	for _, api := range []struct {
		path               string
		body               map[string]any
		text, call, keptBy string
		read               func(*testing.T, []byte) answer
	}{
		{protocol.PathChatCompletions, map[string]any{"messages": q, "tools": []any{weatherTool()}, "max_tokens": 200, "stream": true},
			`"content":"`, `"tool_calls"`, ": keep-alive\n\n", chatStreamAnswer},
		{protocol.PathMessages, map[string]any{"messages": q, "tools": []any{msgTool}, "max_tokens": 200, "stream": true},
			`"text_delta"`, `"tool_use"`, "event: ping\n", messagesStreamAnswer},
	} {
		status, raw := postRaw(t, c.base, api.path, api.body)
		got := api.read(t, []byte(raw))
		if status != http.StatusOK || got.text != "Let me look." || strings.Join(got.calls, "\n") != wantCalls {
			t.Fatalf("%s: %d, text %q, calls %q", api.path, status, got.text, got.calls)
		}
		// The call is held from the end of the text before it.
		call := strings.Index(raw, api.call)
		text := strings.LastIndex(raw[:max(call, 0)], api.text)
		if text < 0 || call < text {
			t.Fatalf("%s: no text before the call: %s", api.path, raw)
		}
		if n := strings.Count(raw[text:call], api.keptBy); n == 0 {
			t.Errorf("%s: no keep-alive while the call was held (%q between the text and the call)", api.path, raw[text:call])
		}
	}
}
