package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The built-in engine's scripted replies (--replies) make the tiny model
// answer a tool call, so that calls go through the real template,
// tokenizer, engines and parser.

// weatherTool is chat's function tool of the tests.
func weatherTool() map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "the weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
}

// weatherCall is the scripted answer: text, then two calls (the space
// that ends the text, and the new line between the calls, are their
// layout: dropped).
const weatherCall = `Let me look. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>
<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon, France"}}</tool_call>`

// startToolCore starts a disaggregated core whose engines answer
// weatherCall to a prompt about the weather.
func startToolCore(t *testing.T) *core {
	t.Helper()
	file := filepath.Join(t.TempDir(), "replies.json")
	replies := `[{"match": "weather", "reply": ` + mustMarshal(t, weatherCall) + `}]`
	if err := os.WriteFile(file, []byte(replies), 0o644); err != nil {
		t.Fatal(err)
	}
	return startCoreArgs(t, 2, Config{Mode: ModeDisagg}, nil, "--replies", file)
}

func mustMarshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer is what a client makes of an answer of any API: its text, its
// calls (name and arguments) and how it ended.
type answer struct {
	text   string
	calls  []string // name + " " + arguments
	finish string
}

// wantCalls are weatherCall's calls as every API carries them.
const wantCalls = `get_weather {"city":"Paris"}` + "\n" + `get_weather {"city":"Lyon, France"}`

func TestToolCallsChatWhole(t *testing.T) {
	c := startToolCore(t)
	counted := testutil.ToFloat64(c.r.metrics.toolCalls.WithLabelValues("tiny", "chat"))
	status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "what is the weather in Paris?"}}, "tools": []any{weatherTool()}, "max_tokens": 200})
	var out protocol.ChatCompletionResponse
	if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
		t.Fatalf("%d %s", status, raw)
	}
	ch := out.Choices[0]
	var got []string
	for _, tc := range ch.Message.ToolCalls {
		if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
			t.Errorf("call %+v: want an id call_… and type function", tc)
		}
		got = append(got, tc.Function.Name+" "+tc.Function.Arguments)
	}
	if ch.Message.Content != "Let me look." || deref(ch.FinishReason) != protocol.FinishToolCalls || strings.Join(got, "\n") != wantCalls {
		t.Fatalf("content %q, calls %q, finish %q; want %q, %q, tool_calls", ch.Message.Content, got, deref(ch.FinishReason), "Let me look.", wantCalls)
	}
	if n := testutil.ToFloat64(c.r.metrics.toolCalls.WithLabelValues("tiny", "chat")) - counted; n != 2 {
		t.Errorf("caddy_mlc_tool_calls_total{api=chat} grew by %v, want 2", n)
	}
	// Without tools the same prompt's answer is the call's text: nothing
	// is read out of it.
	status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "what is the weather in Paris?"}}, "max_tokens": 200})
	var text protocol.ChatCompletionResponse
	if status != http.StatusOK || json.Unmarshal(raw, &text) != nil || text.Choices[0].Message.Content != weatherCall || text.Choices[0].Message.ToolCalls != nil {
		t.Fatalf("without tools: %d %s", status, raw)
	}
}

// Streamed through each API with the decode engine preempting the first
// attempt midway, the calls are the whole answer's, exact: the parser
// reads the text the client gets, whatever the attempts.
func TestToolCallsResumePreempted(t *testing.T) {
	c := startToolCore(t)
	dec := c.fleet.upstreams[c.r.roles["decode"][0]]
	proxy := &preemptingProxy{engine: dec.url, parents: map[string][]string{}}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	dec.url = front.URL
	q := "what is the weather in Paris?"
	msgTool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}
	respTool := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}
	for _, api := range []struct {
		path   string
		body   map[string]any
		read   func(*testing.T, []byte) answer
		finish string
	}{
		{protocol.PathChatCompletions, map[string]any{"messages": []map[string]any{{"role": "user", "content": q}}, "tools": []any{weatherTool()}, "max_tokens": 200, "stream": true}, chatStreamAnswer, protocol.FinishToolCalls},
		{protocol.PathMessages, map[string]any{"messages": []map[string]any{{"role": "user", "content": q}}, "tools": []any{msgTool}, "max_tokens": 200, "stream": true}, messagesStreamAnswer, protocol.StopToolUse},
		{protocol.PathResponses, map[string]any{"input": q, "tools": []any{respTool}, "max_output_tokens": 200, "stream": true}, responsesStreamAnswer, protocol.ResponseCompleted},
	} {
		proxy.preempted.Store(false) // it preempts the next request once
		status, raw := callJSON(t, http.MethodPost, c.base+api.path, api.body)
		if !proxy.preempted.Load() {
			t.Fatalf("%s: the proxy preempted nothing: the test did not test a resume", api.path)
		}
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", api.path, status, raw)
		}
		got := api.read(t, raw)
		if got.text != "Let me look." || strings.Join(got.calls, "\n") != wantCalls || got.finish != api.finish {
			t.Errorf("%s: text %q, calls %q, end %q; want %q, %q, %q", api.path, got.text, got.calls, got.finish, "Let me look.", wantCalls, api.finish)
		}
	}
}

// chatStreamAnswer joins a chat stream's deltas as the SDKs do: content,
// and each call's name and argument pieces by index.
func chatStreamAnswer(t *testing.T, raw []byte) answer {
	var a answer
	var names, args []string
	for _, e := range namedEvents(t, raw) {
		if string(e.data) == "[DONE]" {
			continue
		}
		var chunk protocol.ChatCompletionChunk
		if err := json.Unmarshal(e.data, &chunk); err != nil {
			t.Fatalf("chunk %s: %v", e.data, err)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != nil {
				a.text += *ch.Delta.Content
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.ID != "" {
					names, args = append(names, d.Function.Name), append(args, "")
				}
				args[d.Index] += d.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
	for i := range names {
		a.calls = append(a.calls, names[i]+" "+args[i])
	}
	return a
}

// messagesStreamAnswer joins a message stream's blocks.
func messagesStreamAnswer(t *testing.T, raw []byte) answer {
	var a answer
	blocks := map[int]*struct{ name, input string }{}
	var order []int
	for _, e := range namedEvents(t, raw) {
		var ev struct {
			Index        int
			ContentBlock struct{ Type, Name string } `json:"content_block"`
			Delta        struct {
				Type, Text  string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
		}
		if err := json.Unmarshal(e.data, &ev); err != nil {
			t.Fatalf("event %s: %v", e.data, err)
		}
		switch e.name {
		case protocol.EventContentBlockStart:
			if ev.ContentBlock.Type == protocol.BlockToolUse {
				blocks[ev.Index] = &struct{ name, input string }{name: ev.ContentBlock.Name}
				order = append(order, ev.Index)
			}
		case protocol.EventContentBlockDelta:
			if b := blocks[ev.Index]; b != nil {
				b.input += ev.Delta.PartialJSON
			} else {
				a.text += ev.Delta.Text
			}
		case protocol.EventMessageDelta:
			a.finish = ev.Delta.StopReason
		case protocol.EventError:
			t.Fatalf("error event %s", e.data)
		}
	}
	for _, i := range order {
		a.calls = append(a.calls, blocks[i].name+" "+blocks[i].input)
	}
	return a
}

// responsesStreamAnswer joins a response stream's items.
func responsesStreamAnswer(t *testing.T, raw []byte) answer {
	var a answer
	args := map[string]string{}
	for _, e := range namedEvents(t, raw) {
		var ev struct {
			ItemID   string `json:"item_id"`
			Delta    string
			Item     protocol.ResponseMessage
			Response protocol.Response
		}
		if err := json.Unmarshal(e.data, &ev); err != nil {
			t.Fatalf("event %s: %v", e.data, err)
		}
		switch e.name {
		case protocol.EventOutputTextDelta:
			a.text += ev.Delta
		case protocol.EventArgumentsDelta:
			args[ev.ItemID] += ev.Delta
		case protocol.EventOutputItemDone:
			if ev.Item.Type == protocol.ItemFunctionCall {
				if args[ev.Item.ID] != ev.Item.Arguments {
					t.Errorf("the pieces of %s's arguments %q, the item's %q", ev.Item.ID, args[ev.Item.ID], ev.Item.Arguments)
				}
				a.calls = append(a.calls, ev.Item.Name+" "+ev.Item.Arguments)
			}
		case protocol.EventResponseCompleted, protocol.EventResponseIncomplete, protocol.EventResponseFailed:
			a.finish = ev.Response.Status
		}
	}
	return a
}

// recordedCalls is a callSink that records what it is given.
type recordedCalls struct {
	text   strings.Builder
	calls  []string
	reason string
}

func (r *recordedCalls) delta(_ int, text string, _ *protocol.CompletionLogprobs) error {
	r.text.WriteString(text)
	return nil
}
func (r *recordedCalls) call(_ int, name, arguments string) error {
	r.calls = append(r.calls, name+" "+arguments)
	return nil
}
func (r *recordedCalls) flush()                  {}
func (r *recordedCalls) finish(_ int, rs string) { r.reason = rs }
func (r *recordedCalls) done(protocol.Usage)     {}
func (r *recordedCalls) fail(*protocol.Error)    {}

// The tool-call sink gives the same text, calls and finish reason however
// the answer's text is cut into pieces.
func TestToolCallSinkAnyCut(t *testing.T) {
	for _, c := range []struct {
		text, reason string
		want         answer
	}{
		{weatherCall, protocol.FinishStop, answer{"Let me look.", strings.Split(wantCalls, "\n"), protocol.FinishToolCalls}},
		{weatherCall + "\n", protocol.FinishStop, answer{"Let me look.", strings.Split(wantCalls, "\n"), protocol.FinishToolCalls}},
		{"no call here. \n", protocol.FinishStop, answer{"no call here. \n", nil, protocol.FinishStop}},
		{"cut <tool_call>{\"name\": \"f\", \"argu", protocol.FinishLength, answer{"cut <tool_call>{\"name\": \"f\", \"argu", nil, protocol.FinishLength}},
		{`<tool_call>{"name": "f", "arguments": {bad}}</tool_call>`, protocol.FinishStop, answer{`<tool_call>{"name": "f", "arguments": {bad}}</tool_call>`, nil, protocol.FinishStop}},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			rec := &recordedCalls{}
			s := newToolCallSink(rec, "hermes", 1, nil)
			_ = s.delta(0, c.text[:cut], nil)
			_ = s.delta(0, c.text[cut:], nil)
			s.finish(0, c.reason)
			got := answer{rec.text.String(), rec.calls, rec.reason}
			if got.text != c.want.text || strings.Join(got.calls, "\n") != strings.Join(c.want.calls, "\n") || got.finish != c.want.finish {
				t.Fatalf("%q cut at %d: %+v, want %+v", c.text, cut, got, c.want)
			}
		}
	}
}
