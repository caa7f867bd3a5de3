package caddymlc

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// with returns a copy of body with more members.
func with(body map[string]any, kv ...any) map[string]any {
	out := maps.Clone(body)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// Every answer the router gives, whole or chunk by chunk, is what MLC's
// response models accept (system_fingerprint on chat answers, the role in
// every delta, logprobs in each API's shape) and carries no usage.extra:
// completions and chat, streamed and not, n > 1, echo, stop strings,
// usage, logprobs.
func TestAnswersConformToMLCModels(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	text := reference(s, s.engines[1], greedy("the river", 12))
	words := strings.Fields(text)
	if len(words) < 3 {
		t.Fatalf("reference text %q is too short to cut", text)
	}
	stop := " " + words[2] // reached within max_tokens: the answers end with "stop"
	prompt := map[string]any{"prompt": "the river", "max_tokens": 12, "temperature": 0}
	chat := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "tell me about the river"}}, "max_tokens": 12, "temperature": 0}
	type request struct {
		path string
		body map[string]any
	}
	var requests []request
	for _, b := range []map[string]any{
		prompt,
		with(prompt, "n", 3, "temperature", 1, "seed", 7),
		with(prompt, "echo", true),
		with(prompt, "stop", []string{stop}),
		with(prompt, "logprobs", 3),
		with(prompt, "logprobs", 0, "echo", true, "n", 2, "stop", stop),
		with(prompt, "prompt", []int{5, 17, 42}),
	} {
		requests = append(requests, request{protocol.PathCompletions, b})
	}
	for _, b := range []map[string]any{
		chat,
		with(chat, "n", 2, "temperature", 1, "seed", 7),
		with(chat, "stop", stop),
		with(chat, "logprobs", true),
		with(chat, "logprobs", true, "top_logprobs", 4, "n", 2),
	} {
		requests = append(requests, request{protocol.PathChatCompletions, b})
	}
	finishes := map[string]bool{}
	for _, r := range requests {
		isChat := r.path == protocol.PathChatCompletions
		whole, chunk := mlcschema.CheckClientCompletionResponse, mlcschema.CheckClientCompletionChunk
		if isChat {
			whole, chunk = mlcschema.CheckChatResponse, mlcschema.CheckChatChunk
		}
		raw := post(t, s.base+r.path, r.body, 200)
		if err := whole(bytes.TrimSpace(raw)); err != nil {
			t.Errorf("%s %v: %v\n%s", r.path, r.body, err, raw)
		}
		noExtra(t, raw)
		var answer struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
		}
		_ = json.Unmarshal(raw, &answer)
		for _, c := range answer.Choices {
			finishes[c.FinishReason] = true
		}

		streamed := with(r.body, "stream", true, "stream_options", map[string]any{"include_usage": true})
		raw = post(t, s.base+r.path, streamed, 200)
		evs, done := events(t, raw)
		if !done || len(evs) < 3 {
			t.Errorf("%s %v: %d events, [DONE] %v", r.path, streamed, len(evs), done)
		}
		for _, ev := range evs {
			if err := chunk(ev); err != nil {
				t.Errorf("%s %v: %v\n%s", r.path, streamed, err, ev)
			}
		}
		noExtra(t, raw)
	}
	if !finishes["stop"] || !finishes["length"] {
		t.Fatalf("finish reasons %v: the requests did not cover both", finishes)
	}
}

func noExtra(t *testing.T, raw []byte) {
	t.Helper()
	if bytes.Contains(raw, []byte(`"extra"`)) {
		t.Errorf("usage.extra reached a client: %s", raw)
	}
}

// Every request MLC-LLM's models reject, the router rejects with a 4xx and
// an OpenAI error body, before any engine sees it, but for OpenAI's tool
// calling as agent clients use it (a function without parameters,
// tool_choice "required" and allowed_tools, assistant tool_calls:
// protocol's TestValidateAcceptsBeyondMLC), which the router serves by
// reading calls out of the answer itself.
func TestRequestsMLCRejectsAre4xx(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tool := `{"type":"function","function":{"name":"f","parameters":{}}}`
	for _, c := range []struct {
		chat bool
		body string
	}{
		{false, `{}`},
		{false, `{"prompt":5}`},
		{false, `{"prompt":[1,"a"]}`},
		{false, `{"prompt":[1.5]}`},
		{false, `{"prompt":"a","model":5}`},
		{false, `{"prompt":"a","n":"2"}`},
		{false, `{"prompt":"a","n":2.5}`},
		{false, `{"prompt":"a","max_tokens":"5"}`},
		{false, `{"prompt":"a","best_of":2}`},
		{false, `{"prompt":"a","logprobs":6}`},
		{false, `{"prompt":"a","logprobs":-1}`},
		{false, `{"prompt":"a","logit_bias":{"x":1}}`},
		{false, `{"prompt":"a","logit_bias":{"5":101}}`},
		{false, `{"prompt":"a","frequency_penalty":2.5}`},
		{false, `{"prompt":"a","presence_penalty":-3}`},
		{false, `{"prompt":"a","temperature":"hot"}`},
		{false, `{"prompt":"a","stream":"yes"}`},
		{false, `{"prompt":"a","echo":1}`},
		{false, `{"prompt":"a","stop":["a",1]}`},
		{false, `{"prompt":"a","user":5}`},
		{false, `{"prompt":"a","response_format":{"type":"json_schema"}}`},
		{false, `{"prompt":"a","stream_options":{"include_usage":"yes"},"stream":true}`},
		{false, `{"prompt":"a","debug_config":{"special_request":"other"}}`},
		{false, `{"prompt":"a","debug_config":{"disagg_config":{"kind":"x"}}}`},
		{true, `{}`},
		{true, `{"messages":{}}`},
		{true, `{"messages":["hi"]}`},
		{true, `{"messages":[{"role":"wizard","content":"x"}]}`},
		{true, `{"messages":[{"content":"x"}]}`},
		{true, `{"messages":[{"role":"user","content":5}]}`},
		{true, `{"messages":[{"role":"user","content":"x"},{"role":"system","content":"y"}]}`},
		{true, `{"messages":[{"role":"user","content":"x","tool_call_id":"c"}]}`},
		{true, `{"messages":[{"role":"assistant","content":[{"type":"text","text":"x"}]}]}`},
		{true, `{` + msgs + `,"n":"2"}`},
		{true, `{` + msgs + `,"logprobs":"true"}`},
		{true, `{` + msgs + `,"logprobs":true,"top_logprobs":21}`},
		{true, `{` + msgs + `,"top_logprobs":1}`},
		{true, `{` + msgs + `,"stream_options":{"include_usage":true}}`},
		{true, `{` + msgs + `,"debug_config":{"special_request":"query_engine_metrics"}}`},
		{true, `{` + msgs + `,"frequency_penalty":-2.5}`},
		{true, `{` + msgs + `,"logit_bias":{"1":-101}}`},
		{true, `{` + msgs + `,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}}`},
		{true, `{` + msgs + `,"response_format":{"type":"yaml"}}`},
	} {
		check, path := mlcschema.CheckCompletionRequest, protocol.PathCompletions
		if c.chat {
			check, path = mlcschema.CheckChatRequest, protocol.PathChatCompletions
		}
		if check([]byte(c.body)) == nil {
			t.Errorf("MLC's models accept %s: not a case for this test", c.body)
			continue
		}
		status, raw := httpCall(t, "POST", s.base+path, c.body)
		if status < 400 || status >= 500 {
			t.Errorf("%s %s: %d %s, want a 4xx", path, c.body, status, raw)
			continue
		}
		if err := mlcschema.CheckErrorBody(bytes.TrimSpace(raw)); err != nil {
			t.Errorf("%s %s: %v\n%s", path, c.body, err, raw)
		}
	}
}
