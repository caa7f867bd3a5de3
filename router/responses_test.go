package router

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// responsesConversation is a conversation as the Responses API's input
// (instructions, then items: a developer message joins them in the
// system prompt) and as chat messages.
var (
	responsesInput = []map[string]any{
		{"role": "developer", "content": "Be brief."},
		{"role": "user", "content": "the cat sat on"},
		{"type": "message", "role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "the mat"}}},
		{"role": "user", "content": []map[string]any{{"type": "input_text", "text": "and the "}, {"type": "input_text", "text": "dog?"}}},
	}
	responsesChat = []map[string]any{
		{"role": "system", "content": "You answer in one line.\n\nBe brief."},
		{"role": "user", "content": "the cat sat on"},
		{"role": "assistant", "content": "the mat"},
		{"role": "user", "content": "and the dog?"},
	}
)

// A conversation through /v1/responses, whole and streamed, is answered
// with the text the chat completion of the same conversation has
// (greedy), cut by max_output_tokens as incomplete, with its usage; the
// stream is OpenAI's event sequence, numbered from 0, each event's data
// typed as its name.
func TestResponsesEqualChat(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeDisagg}, nil)
	for _, maxTokens := range []int{3, 30} {
		want, finish, usage := chatAnswer(t, c.base, responsesChat, maxTokens)
		if want == "" || finish != "length" {
			t.Fatalf("chat: %q, finish %q", want, finish)
		}
		body := map[string]any{"model": "tiny", "instructions": "You answer in one line.", "input": responsesInput,
			"max_output_tokens": maxTokens, "temperature": 0, "metadata": map[string]string{"turn": "1"}}
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathResponses, body)
		var whole protocol.Response
		if status != http.StatusOK || json.Unmarshal(raw, &whole) != nil {
			t.Fatalf("whole: %d %s", status, raw)
		}
		checkResponse(t, "whole", whole, want, usage)
		if whole.Metadata["turn"] != "1" || deref(whole.Instructions) != "You answer in one line." {
			t.Errorf("whole: %s", raw)
		}

		body["stream"] = true
		status, raw = callJSON(t, http.MethodPost, c.base+protocol.PathResponses, body)
		if status != http.StatusOK {
			t.Fatalf("stream: %d %s", status, raw)
		}
		var names []string
		var text strings.Builder
		var last protocol.Response
		for i, e := range namedEvents(t, raw) {
			var typed struct {
				Type           string
				SequenceNumber *int `json:"sequence_number"`
				Delta, Text    string
				ItemID         string `json:"item_id"`
				Response       protocol.Response
			}
			if err := json.Unmarshal(e.data, &typed); err != nil || typed.Type != e.name || typed.SequenceNumber == nil || *typed.SequenceNumber != i {
				t.Fatalf("event %d %q: %s", i, e.name, e.data)
			}
			if n := len(names); n == 0 || names[n-1] != e.name || e.name != protocol.EventOutputTextDelta {
				names = append(names, e.name)
			}
			switch e.name {
			case protocol.EventOutputTextDelta:
				text.WriteString(typed.Delta)
			case protocol.EventOutputTextDone:
				if typed.Text != want {
					t.Errorf("output_text.done: %s", e.data)
				}
			case protocol.EventResponseCreated, protocol.EventResponseInProgress:
				if typed.Response.Status != protocol.ResponseInProgress || typed.Response.ID == "" {
					t.Errorf("%s: %s", e.name, e.data)
				}
			case protocol.EventResponseIncomplete:
				last = typed.Response
			}
		}
		wantNames := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}
		if !slices.Equal(names, wantNames) {
			t.Fatalf("events %v, want %v", names, wantNames)
		}
		if text.String() != want {
			t.Fatalf("max_output_tokens %d: streamed %q, chat %q", maxTokens, text.String(), want)
		}
		checkResponse(t, "streamed", last, want, usage)
	}
}

// checkResponse checks a response cut by max_output_tokens: its text,
// status and usage.
func checkResponse(t *testing.T, what string, r protocol.Response, text string, usage protocol.Usage) {
	t.Helper()
	if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Model != "tiny" || r.Status != protocol.ResponseIncomplete ||
		r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || len(r.Output) != 1 {
		t.Fatalf("%s: %+v", what, r)
	}
	m := r.Output[0]
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Status != protocol.ResponseIncomplete ||
		len(m.Content) != 1 || m.Content[0].Type != "output_text" || m.Content[0].Text != text {
		t.Fatalf("%s: output %+v, want text %q", what, m, text)
	}
	if u := r.Usage; u == nil || u.InputTokens != usage.PromptTokens || u.OutputTokens != usage.CompletionTokens || u.TotalTokens != usage.TotalTokens {
		t.Fatalf("%s: usage %+v, chat's %+v", what, u, usage)
	}
}

// What the Responses API cannot serve is a 400 in OpenAI's shape that
// names the parameter; an unknown model a 404.
func TestResponsesErrors(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, RefuseMaxTokens: true}, nil)
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		param  string
	}{
		{"no input", map[string]any{"model": "tiny"}, 400, "input"},
		{"empty input", map[string]any{"input": ""}, 400, "input"},
		{"tool_choice", map[string]any{"input": "hi", "tools": []map[string]any{{"type": "function", "name": "f"}}, "tool_choice": map[string]any{"type": "function", "name": "g"}}, 400, "tool_choice.name"},
		{"conversation", map[string]any{"input": "hi", "conversation": "conv_1"}, 400, "conversation"},
		{"image", map[string]any{"input": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_image", "image_url": "http://x/y.png"}}}}},
			400, "input[0].content[0].type"},
		{"function call output", map[string]any{"input": []map[string]any{{"type": "function_call_output", "output": "4"}}}, 400, "input[0].call_id"},
		{"item reference", map[string]any{"input": []map[string]any{{"type": "item_reference", "id": "msg_1"}}}, 400, "input[0].type"},
		{"json", map[string]any{"input": "hi", "text": map[string]any{"format": map[string]any{"type": "xml"}}}, 400, "text.format.type"},
		{"json schema keyword", map[string]any{"input": "hi", "text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "x",
			"schema": map[string]any{"type": "object", "required": []string{"a"}, "properties": map[string]any{"a": map[string]any{"type": "array", "contains": map[string]any{}, "maxContains": 1}}}}}}, 400, "text.format.schema.properties.a.maxContains"},
		{"max_output_tokens", map[string]any{"input": "hi", "max_output_tokens": 0}, 400, "max_output_tokens"},
		{"model", map[string]any{"model": "gpt-4.1", "input": "hi"}, 404, "model"},
		{"context", map[string]any{"input": "hi", "max_output_tokens": 1 << 30}, 400, "max_output_tokens"},
	} {
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathResponses, tc.body)
		var got protocol.ErrorBody
		if err := json.Unmarshal(raw, &got); err != nil || status != tc.status || got.Error == nil || deref(got.Error.Param) != tc.param {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, status, raw, tc.status, tc.param)
		}
	}
}

// A response that ends with a stop is completed, its message too; one
// that fails after its stream began ends with response.failed, carrying
// the text so far.
func TestResponsesSinkEnds(t *testing.T) {
	req := &protocol.CompletionRequest{Prompt: protocol.TokenPrompt([]int{1, 2})}
	w := httptest.NewRecorder()
	s := (&responseCall{}).sink(w, "resp_1", "tiny", req)
	_ = s.delta(0, "hello", nil)
	s.finish(0, protocol.FinishStop)
	s.done(protocol.Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3})
	var r protocol.Response
	if json.Unmarshal(w.Body.Bytes(), &r) != nil || r.Status != protocol.ResponseCompleted || r.IncompleteDetails != nil ||
		r.Output[0].Status != protocol.ResponseCompleted || r.Output[0].Text() != "hello" {
		t.Errorf("whole: %s", w.Body)
	}

	w = httptest.NewRecorder()
	req.Stream = true
	s = (&responseCall{}).sink(w, "resp_1", "tiny", req)
	_ = s.delta(0, "hello", nil)
	s.fail(protocol.Errorf(http.StatusBadGateway, protocol.ErrTypeServer, "the engines failed"))
	events := namedEvents(t, w.Body.Bytes())
	last := events[len(events)-1]
	var e protocol.ResponseStateEvent
	if last.name != protocol.EventResponseFailed || json.Unmarshal(last.data, &e) != nil || e.Response.Status != protocol.ResponseFailed ||
		e.Response.Error == nil || e.Response.Error.Message != "the engines failed" || e.Response.Output[0].Text() != "hello" {
		t.Errorf("streamed failure: %s", w.Body)
	}
}
