package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A streamed message and a streamed response that the decode engine
// preempts midway are resumed as chat is: their text is the chat
// completion's, exact, and the client sees no trace of the preemption.
func TestChatPathAPIsResumePreempted(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	chat := []map[string]any{{"role": "user", "content": "the lighthouse keeper counted the ships"}}
	want, _, _ := chatAnswer(t, c.base, chat, 24)
	dec := c.fleet.upstreams[c.r.roles["decode"][0]]
	proxy := &preemptingProxy{engine: dec.url, parents: map[string][]string{}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	dec.url = front.URL
	for _, api := range []struct {
		path  string
		body  map[string]any
		delta string // the event that carries text
	}{
		{protocol.PathMessages, map[string]any{"messages": chat, "max_tokens": 24, "temperature": 0, "stream": true}, protocol.EventContentBlockDelta},
		{protocol.PathResponses, map[string]any{"input": chat[0]["content"], "max_output_tokens": 24, "temperature": 0, "stream": true}, protocol.EventOutputTextDelta},
	} {
		proxy.preempted.Store(false) // it preempts the next request once
		status, raw := callJSON(t, http.MethodPost, c.base+api.path, api.body)
		if !proxy.preempted.Load() {
			t.Fatalf("%s: the proxy preempted nothing: the test did not test a resume", api.path)
		}
		var text strings.Builder
		for _, e := range namedEvents(t, raw) {
			if strings.Contains(string(e.data), "preempt") || strings.Contains(e.name, "error") || strings.Contains(e.name, "failed") {
				t.Fatalf("%s: the client saw %s %s", api.path, e.name, e.data)
			}
			if e.name != api.delta {
				continue
			}
			var d struct {
				Delta json.RawMessage
			}
			_ = json.Unmarshal(e.data, &d)
			var piece struct{ Text string }
			if json.Unmarshal(d.Delta, &piece) != nil { // the Responses API's delta is the text itself
				_ = json.Unmarshal(d.Delta, &piece.Text)
			}
			text.WriteString(piece.Text)
		}
		if status != http.StatusOK || text.String() != want {
			t.Fatalf("%s: %d, resumed text %q, chat %q", api.path, status, text.String(), want)
		}
	}
}
