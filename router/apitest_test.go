package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Helpers of the tests of the APIs built on chat (Messages, Responses):
// raw requests, their named events, and the chat answer they must equal.

// callJSON sends body (JSON; nil: none) with method to url and returns the
// status and the whole body.
func callJSON(t testing.TB, method, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	return callJSONWith(t, method, url, body, nil, header...)
}

// callJSONWith is callJSON that hands the answer to seen (when not nil)
// before its body is read.
func callJSONWith(t testing.TB, method, url string, body any, seen func(*http.Response), header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if seen != nil {
		seen(resp)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// namedEvent is one event of a stream: its event: name and its data.
type namedEvent struct {
	name string
	data []byte
}

// namedEvents reads a stream's events; an event without a name is named
// "".
func namedEvents(t testing.TB, body []byte) []namedEvent {
	t.Helper()
	var out []namedEvent
	var cur namedEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != nil {
				out = append(out, cur)
			}
			cur = namedEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = []byte(strings.TrimPrefix(line, "data: "))
		}
	}
	if cur.data != nil {
		t.Fatalf("the stream ends inside an event: %q", body)
	}
	return out
}

// chatAnswer posts a whole greedy chat completion of messages, with the
// stop strings given, and returns its text, finish reason and usage.
func chatAnswer(t testing.TB, base string, messages []map[string]any, maxTokens int, stop ...string) (string, string, protocol.Usage) {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, base+protocol.PathChatCompletions,
		map[string]any{"messages": messages, "max_tokens": maxTokens, "temperature": 0, "stop": stop})
	var out protocol.ChatCompletionResponse
	if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 || out.Usage == nil {
		t.Fatalf("chat: %d %s", status, raw)
	}
	ch := out.Choices[0]
	return ch.Message.Content, deref(ch.FinishReason), *out.Usage
}
