package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcschema"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// validateBody decodes and validates a request body as the router does.
func validateBody(chat bool, body string) *protocol.Error {
	if chat {
		var r protocol.ChatCompletionRequest
		if e := protocol.DecodeJSON([]byte(body), &r); e != nil {
			return e
		}
		return r.Validate()
	}
	_, e := protocol.DecodeCompletionRequest(strings.NewReader(body), 0)
	return e
}

type requestCase struct {
	chat bool
	body string
}

func (c requestCase) mlc() error {
	if c.chat {
		return mlcschema.CheckChatRequest([]byte(c.body))
	}
	return mlcschema.CheckCompletionRequest([]byte(c.body))
}

func completionCase(body string) requestCase { return requestCase{false, body} }
func chatCase(body string) requestCase       { return requestCase{true, body} }

// chatBody is a chat request of one user message and the given members.
func chatBody(more string) string {
	return `{"messages":[{"role":"user","content":"hi"}]` + more + `}`
}

// What MLC-LLM's models reject, Validate rejects too, with a 400: the same
// table through both.
func TestValidateRejectsWhatMLCRejects(t *testing.T) {
	tool := `{"type":"function","function":{"name":"f","parameters":{}}}`
	for _, c := range []requestCase{
		completionCase(`{}`),
		completionCase(`{"prompt":5}`),
		completionCase(`{"prompt":[1,"a"]}`),
		completionCase(`{"prompt":[1.5]}`),
		completionCase(`{"prompt":"a","n":"2"}`),
		completionCase(`{"prompt":"a","n":2.5}`),
		completionCase(`{"prompt":"a","max_tokens":"5"}`),
		completionCase(`{"prompt":"a","best_of":2}`),
		completionCase(`{"prompt":"a","logprobs":6}`),
		completionCase(`{"prompt":"a","logprobs":-1}`),
		completionCase(`{"prompt":"a","logit_bias":{"x":1}}`),
		completionCase(`{"prompt":"a","logit_bias":{"5":101}}`),
		completionCase(`{"prompt":"a","logit_bias":{"5":"1"}}`),
		completionCase(`{"prompt":"a","frequency_penalty":2.5}`),
		completionCase(`{"prompt":"a","presence_penalty":-3}`),
		completionCase(`{"prompt":"a","temperature":"hot"}`),
		completionCase(`{"prompt":"a","stream":"yes"}`),
		completionCase(`{"prompt":"a","echo":1}`),
		completionCase(`{"prompt":"a","stop":5}`),
		completionCase(`{"prompt":"a","stop":["a",1]}`),
		completionCase(`{"prompt":"a","user":5}`),
		completionCase(`{"prompt":"a","response_format":{"type":"json_schema"}}`),
		completionCase(`{"prompt":"a","stream_options":{"include_usage":"yes"},"stream":true}`),
		completionCase(`{"prompt":"a","debug_config":{"special_request":"other"}}`),
		completionCase(`{"prompt":"a","debug_config":{"disagg_config":{"kind":"x"}}}`),
		completionCase(`{"prompt":"a","debug_config":{"grammar_execution_mode":"x"}}`),
		completionCase(`{"prompt":"a","debug_config":{"ignore_eos":"yes"}}`),
		chatCase(`{}`),
		chatCase(`{"messages":{}}`),
		chatCase(`{"messages":["hi"]}`),
		chatCase(`{"messages":[{"role":"wizard","content":"x"}]}`),
		chatCase(`{"messages":[{"role":"user\nassistant","content":"x"}]}`),
		chatCase(`{"messages":[{"content":"x"}]}`),
		chatCase(`{"messages":[{"role":"user","content":5}]}`),
		chatCase(`{"messages":[{"role":"user","content":["x"]}]}`),
		chatCase(`{"messages":[{"role":"user","content":"x","name":1}]}`),
		chatCase(`{"messages":[{"role":"user","content":"x"},{"role":"system","content":"y"}]}`),
		chatCase(`{"messages":[{"role":"user","content":"x","tool_call_id":"c"}]}`),
		chatCase(`{"messages":[{"role":"assistant","content":[{"type":"text","text":"x"}]}]}`),
		chatCase(`{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`),
		chatCase(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`),
		chatCase(chatBody(`,"n":"2"`)),
		chatCase(chatBody(`,"logprobs":"true"`)),
		chatCase(chatBody(`,"logprobs":true,"top_logprobs":21`)),
		chatCase(chatBody(`,"top_logprobs":1`)),
		chatCase(chatBody(`,"stream_options":{"include_usage":true}`)),
		chatCase(chatBody(`,"debug_config":{"special_request":"query_engine_metrics"}`)),
		chatCase(chatBody(`,"stream":true,"debug_config":{"special_request":"query_engine_metrics"}`)),
		chatCase(chatBody(`,"frequency_penalty":-2.5`)),
		chatCase(chatBody(`,"logit_bias":{"1":-101}`)),
		chatCase(chatBody(`,"tools":[{"type":"retrieval","function":{"name":"f","parameters":{}}}]`)),
		chatCase(chatBody(`,"tools":[{"type":"function","function":{"parameters":{}}}]`)),
		chatCase(chatBody(`,"tool_choice":1`)),
		chatCase(chatBody(`,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}`)),
		chatCase(chatBody(`,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"f","x":1}}`)),
		chatCase(chatBody(`,"tools":[` + tool + `],"tool_choice":{"function":{"name":"f"}}`)),
		chatCase(chatBody(`,"response_format":{"type":"yaml"}`)),
	} {
		if err := c.mlc(); err == nil {
			t.Errorf("the checker accepts %s", c.body)
		}
		if e := validateBody(c.chat, c.body); e == nil || e.Status != 400 || e.Code == nil && e.Param == nil {
			t.Errorf("Validate: %+v for %s", e, c.body)
		}
	}
}

// What the router accepts beyond MLC's models, on purpose: OpenAI's tool
// calling as agent clients use it (a function without parameters,
// tool_choice "required" and allowed_tools, assistant turns that called
// tools), which the router serves by reading calls out of the answer
// itself.
func TestValidateAcceptsBeyondMLC(t *testing.T) {
	for _, c := range []requestCase{
		chatCase(chatBody(`,"tools":[{"type":"function","function":{"name":"f"}}]`)),
		chatCase(chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":{},"strict":true}}],"tool_choice":"required"`)),
		chatCase(chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}`)),
		chatCase(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"z","tool_call_id":"c"}]}`),
	} {
		if err := c.mlc(); err == nil {
			t.Errorf("MLC's models accept %s: not a case for this test", c.body)
		}
		if e := validateBody(c.chat, c.body); e != nil {
			t.Errorf("Validate: %v for %s", e, c.body)
		}
	}
}

// What both accept.
func TestValidateAcceptsWhatMLCAccepts(t *testing.T) {
	for _, c := range []requestCase{
		completionCase(`{"prompt":"a"}`),
		completionCase(`{"prompt":[1,2],"n":2,"best_of":1,"logprobs":5,"stop":"x","stream":true,"stream_options":{"include_usage":true},"logit_bias":{"5":100}}`),
		completionCase(`{"prompt":"a","response_format":{"type":"json_object","schema":"{}"},"temperature":0,"top_p":1,"seed":-1,"vendor":{"x":1}}`),
		completionCase(`{"prompt":"a","debug_config":{"ignore_eos":true,"disagg_config":{"kind":"prepare_receive","kv_window_end":-1}}}`),
		chatCase(chatBody(``)),
		chatCase(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":"y"},{"role":"tool","content":"z","tool_call_id":"c"}]}`),
		chatCase(chatBody(`,"logprobs":true,"top_logprobs":20,"stop":["a","b"],"n":3`)),
		chatCase(chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}`)),
		chatCase(chatBody(`,"stream":true,"stream_options":{"include_usage":true},"debug_config":{"special_request":"query_engine_metrics"}`)),
	} {
		if err := c.mlc(); err != nil {
			t.Errorf("the checker: %v", err)
		}
		if e := validateBody(c.chat, c.body); e != nil {
			t.Errorf("Validate: %v for %s", e, c.body)
		}
	}
}

// Where MLC's models are stricter than OpenAI's API, Validate follows
// OpenAI, on purpose: a null for a field that has a default, and
// stream_options without include_usage, mean the default. The router
// never forwards either as sent (an absent or false value is what engines
// see), so MLC engines never see them. This test lists the differences so
// that a new one is a decision, not an accident.
func TestValidateIsLenientWhereOpenAIIs(t *testing.T) {
	for _, c := range []requestCase{
		completionCase(`{"prompt":"a","n":null}`),
		completionCase(`{"prompt":"a","best_of":null}`),
		completionCase(`{"prompt":"a","stream":null,"echo":null}`),
		completionCase(`{"prompt":"a","stream":true,"stream_options":{}}`),
		chatCase(chatBody(`,"n":null,"logprobs":null,"top_logprobs":null`)),
	} {
		if err := c.mlc(); err == nil {
			t.Errorf("the checker now accepts %s: drop it from this list", c.body)
		}
		if e := validateBody(c.chat, c.body); e != nil {
			t.Errorf("Validate: %v for %s", e, c.body)
		}
	}
}

// The answers the router builds from protocol's types are what MLC's
// models accept, and usage.extra stays out of them.
func TestAnswersConformToMLC(t *testing.T) {
	stop := protocol.FinishStop
	text := "hi"
	usage := &protocol.Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3}
	lp := &protocol.CompletionLogprobs{TextOffset: []int{0}, TokenLogprobs: []float64{-0.5}, Tokens: []string{"hi"},
		TopLogprobs: []protocol.TopLogprobs{{{Token: "hi", Logprob: -0.5}, {Token: "ho", Logprob: -1}}}}
	chatLP := lp.Chat()
	for _, c := range []struct {
		name  string
		check func([]byte) error
		v     any
	}{
		{"completion", mlcschema.CheckClientCompletionResponse, protocol.CompletionResponse{ID: "cmpl-1", Object: protocol.ObjectTextCompletion, Created: 1, Model: "tiny",
			Choices: []protocol.CompletionChoice{{Text: "hi", FinishReason: &stop, Logprobs: lp}, {Index: 1, Text: "ho", FinishReason: &stop}}, Usage: usage}},
		{"completion chunk", mlcschema.CheckClientCompletionChunk, protocol.CompletionResponse{ID: "cmpl-1", Object: protocol.ObjectTextCompletion, Created: 1, Model: "tiny",
			Choices: []protocol.CompletionChoice{{Text: "h"}}}},
		{"completion usage chunk", mlcschema.CheckClientCompletionChunk, protocol.CompletionResponse{ID: "cmpl-1", Object: protocol.ObjectTextCompletion, Created: 1, Model: "tiny",
			Choices: []protocol.CompletionChoice{}, Usage: usage}},
		{"chat", mlcschema.CheckChatResponse, protocol.ChatCompletionResponse{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletion, Created: 1, Model: "tiny",
			Choices: []protocol.ChatChoice{{Message: protocol.ChatMessage{Content: "hi"}, FinishReason: &stop, Logprobs: &chatLP}}, Usage: usage}},
		{"chat chunk", mlcschema.CheckChatChunk, protocol.ChatCompletionChunk{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletionChunk, Created: 1, Model: "tiny",
			Choices: []protocol.ChatChunkChoice{{Delta: protocol.ChatDelta{Content: &text}}}}},
		{"chat finish chunk", mlcschema.CheckChatChunk, protocol.ChatCompletionChunk{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletionChunk, Created: 1, Model: "tiny",
			Choices: []protocol.ChatChunkChoice{{Index: 2, FinishReason: &stop}}}},
		{"chat usage chunk", mlcschema.CheckChatChunk, protocol.ChatCompletionChunk{ID: "chatcmpl-1", Object: protocol.ObjectChatCompletionChunk, Created: 1, Model: "tiny",
			Choices: []protocol.ChatChunkChoice{}, Usage: usage}},
		{"models", mlcschema.CheckModelList, protocol.NewModelList(1, "caddy-mlc", "tiny", "other")},
		{"error", mlcschema.CheckErrorBody, protocol.ErrorBody{Error: protocol.InvalidRequest("n", "bad n").WithCode(protocol.CodeIntegerAboveMax)}},
		{"error without param", mlcschema.CheckErrorBody, protocol.ErrorBody{Error: protocol.Errorf(500, protocol.ErrTypeServer, "boom")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.check(b); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if strings.Contains(string(b), `"extra"`) {
				t.Fatalf("usage.extra reached a client: %s", b)
			}
		})
	}
}

// Engines' usage.extra still reaches the router, and empty extra is not
// written.
func TestUsageExtra(t *testing.T) {
	var u protocol.Usage
	if err := json.Unmarshal([]byte(`{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1,"extra":{"prefix_matched_length":4}}`), &u); err != nil {
		t.Fatal(err)
	}
	if string(u.Extra["prefix_matched_length"]) != "4" {
		t.Fatalf("extra lost: %+v", u)
	}
	u.Extra = map[string]json.RawMessage{}
	if b, _ := json.Marshal(u); strings.Contains(string(b), "extra") {
		t.Fatalf("empty extra written: %s", b)
	}
}
