package caddymlc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// startPreemptingProxy serves the MLC server at addr through a proxy
// that, while armed is set, preempts the next generation once it has
// text (finish_reason "preempt" after three text events of a stream, or
// a whole answer cut to half its text), and disarms. It returns the
// proxy's address.
func startPreemptingProxy(t *testing.T, addr string, armed *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		generation := (r.URL.Path == protocol.PathCompletions || r.URL.Path == protocol.PathStartGenerate) && !bytes.Contains(body, []byte("special_request"))
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		switch {
		case !generation || !armed.Load() || resp.StatusCode != http.StatusOK:
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		case strings.HasPrefix(resp.Header.Get("Content-Type"), protocol.ContentTypeEventStream):
			w.WriteHeader(resp.StatusCode)
			completiontest.PreemptStream(w, resp.Body, 3, func() bool { return armed.CompareAndSwap(true, false) })
		default:
			preemptWhole(w, resp.Body, armed)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// preemptWhole answers an engine's whole answer cut to half its text,
// with finish_reason "preempt", if armed is still set.
func preemptWhole(w http.ResponseWriter, body io.Reader, armed *atomic.Bool) {
	raw, _ := io.ReadAll(body)
	var out protocol.CompletionResponse
	if json.Unmarshal(raw, &out) != nil || len(out.Choices) == 0 || len(out.Choices[0].Text) < 4 || !armed.CompareAndSwap(true, false) {
		protocol.WriteJSON(w, http.StatusOK, json.RawMessage(raw))
		return
	}
	ch := &out.Choices[0]
	ch.Text = ch.Text[:len(ch.Text)/2]
	ch.FinishReason = new(protocol.FinishPreempt)
	protocol.WriteJSON(w, http.StatusOK, out)
}

// structuredPreempted proves that a structured answer an MLC engine
// preempts midway is never spliced: MLC's engines restart their grammar
// where a request resumes (they do not read resumed_tokens), so a whole
// answer starts over, the same as one never preempted, and so does a
// streamed required call (its client sees the call only whole); a
// streamed response format whose start was sent ends with a clear error
// after it.
func (m *mlcRun) structuredPreempted(t *testing.T) {
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": json.RawMessage(structuredPerson)}}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	for _, c := range []struct {
		name string
		kv   []any
	}{
		{"response_format", []any{"response_format", format}},
		{"required_call", []any{"tools", tools, "tool_choice", "required"}},
	} {
		body := map[string]any{"model": "tiny", "max_tokens": 160, "temperature": 0,
			"messages": []map[string]string{{"role": "user", "content": "the cat sat on"}}}
		for i := 0; i < len(c.kv); i += 2 {
			body[c.kv[i].(string)] = c.kv[i+1]
		}
		status, want := m.postChat(t, m.router, body)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, status, want)
		}
		m.preempt.Store(true)
		status, got := m.postChat(t, m.proxied, body)
		if m.preempt.Load() {
			t.Fatalf("%s: the proxy preempted nothing: the test tested no resume", c.name)
		}
		if status != http.StatusOK || messageOf(t, got) != messageOf(t, want) {
			t.Errorf("%s, whole, preempted: %d\n got  %s\n want %s", c.name, status, got, want)
		}

		body["stream"] = true
		_, whole := m.postChat(t, m.router, body)
		m.preempt.Store(true)
		status, raw := m.postChat(t, m.proxied, body)
		if m.preempt.Load() {
			t.Fatalf("%s: the proxy preempted no stream", c.name)
		}
		switch {
		case c.name == "required_call" && (status != http.StatusOK || streamedCalls(raw) != streamedCalls(whole) || !strings.Contains(streamedCalls(raw), "get_weather")):
			t.Errorf("required call, streamed, preempted: want the call never preempted, %q: %d %s", streamedCalls(whole), status, raw)
		case c.name != "required_call" && (status != http.StatusOK || !strings.Contains(string(raw), `"code":"cannot_resume"`) || strings.Contains(string(raw), `"finish_reason":"stop"`)):
			t.Errorf("%s, streamed, preempted after text: want its start, then a cannot_resume error and no finish: %d %s", c.name, status, raw)
		}
	}
}

// streamedCalls are the tool calls' names and arguments of a chat stream,
// and its finish reason.
func streamedCalls(raw []byte) string {
	var calls, finish string
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == protocol.DoneData {
			continue
		}
		var ch protocol.ChatCompletionChunk
		if json.Unmarshal([]byte(data), &ch) != nil || len(ch.Choices) == 0 {
			continue
		}
		for _, tc := range ch.Choices[0].Delta.ToolCalls {
			calls += tc.Function.Name + tc.Function.Arguments
		}
		if r := ch.Choices[0].FinishReason; r != nil {
			finish = *r
		}
	}
	return calls + "|" + finish
}

// messageOf is the first choice's message of a chat answer, as JSON
// (content or tool calls' names and arguments), and its finish reason.
func messageOf(t *testing.T, raw []byte) string {
	t.Helper()
	var out protocol.ChatCompletionResponse
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
		return "unreadable: " + string(raw)
	}
	ch := out.Choices[0]
	calls := ""
	for _, tc := range ch.Message.ToolCalls {
		calls += tc.Function.Name + " " + tc.Function.Arguments + "\n"
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	return fmt.Sprintf("%v|%s|%s", ch.Message.Content, calls, finish)
}
