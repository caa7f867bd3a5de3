package mlcschema

import (
	"errors"
	"strings"
	"testing"
)

// Valid bodies, as MLC-LLM's server and the router write them.
const (
	completionWhole = `{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",
		"choices":[{"index":0,"text":"hi","finish_reason":"stop","logprobs":{"text_offset":[0],"token_logprobs":[-0.1],"tokens":["hi"],"top_logprobs":[{"hi":-0.1,"ho":-2}]}}],
		"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	completionChunk = `{"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":[{"index":1,"text":"h","finish_reason":null,"logprobs":null}]}`
	engineChunk     = `{"id":"cmpl-1","object":"text_completion","created":1,"choices":[{"text":"","finish_reason":"preempt"}],
		"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3,"extra":{"prefix_matched_length":2,"kv_append_metadata":"W10="}}}`
	usageChunk = `{"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	chatWhole  = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"tiny","system_fingerprint":"caddy-mlc",
		"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length",
		"logprobs":{"content":[{"token":"hi","logprob":-0.1,"bytes":[104,105],"top_logprobs":[{"token":"hi","logprob":-0.1,"bytes":null}]}]}}],
		"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	chatChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"tiny","system_fingerprint":"caddy-mlc",
		"choices":[{"index":0,"delta":{"role":"assistant","content":"h"},"finish_reason":null,"logprobs":null}]}`
	chatUsageChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"system_fingerprint":"caddy-mlc","choices":[],
		"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	modelListBody = `{"object":"list","data":[{"id":"tiny","object":"model","created":1,"owned_by":"caddy-mlc"}]}`
	errorBody     = `{"error":{"message":"n must be at most 128, got 129","type":"invalid_request_error","param":"n","code":"integer_above_max_value"}}`
	mlcErrorBody  = `{"object":"error","message":"bad","code":400}`

	embeddingWhole = `{"object":"list","data":[{"object":"embedding","embedding":[0.5,-0.25],"index":0},{"object":"embedding","embedding":"AAAAPwAAgL4=","index":1}],
		"model":"tiny-embed","usage":{"prompt_tokens":3,"total_tokens":3}}`
	completionReq = `{"prompt":[1,2],"best_of":1,"n":2,"stream":true,"stream_options":{"include_usage":true},"stop":"x","logprobs":5,
		"logit_bias":{"5":1,"-3":-100},"frequency_penalty":0,"presence_penalty":2,"seed":-4,"unknown":{"kept":true},
		"response_format":{"type":"json_object","schema":"{}"},
		"debug_config":{"ignore_eos":true,"disagg_config":{"kind":"remote_send","kv_window_begin":-1,"kv_window_end":null}}}`
	chatReq = `{"messages":[
		{"role":"system","content":"be kind"},
		{"role":"user","content":[{"type":"text","text":"hi"}],"name":"ann"},
		{"role":"assistant","content":null},
		{"role":"tool","content":"42","tool_call_id":"call_1"}],
		"logprobs":true,"top_logprobs":20,"stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"f"}},
		"debug_config":{"special_request":"query_engine_metrics"}}`
)

func TestAcceptsValidBodies(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func([]byte) error
		body  string
	}{
		{"completion", CheckCompletionResponse, completionWhole},
		{"completion client", CheckClientCompletionResponse, completionWhole},
		{"completion chunk", CheckCompletionChunk, completionChunk},
		{"completion chunk client", CheckClientCompletionChunk, completionChunk},
		{"engine chunk with preempt and extra", CheckCompletionChunk, engineChunk},
		{"usage chunk", CheckClientCompletionChunk, usageChunk},
		{"chat", CheckChatResponse, chatWhole},
		{"chat chunk", CheckChatChunk, chatChunk},
		{"chat usage chunk", CheckChatChunk, chatUsageChunk},
		{"models", CheckModelList, modelListBody},
		{"error", CheckErrorBody, errorBody},
		{"error without param and code", CheckErrorBody, `{"error":{"message":"m","type":"server_error","param":null,"code":null}}`},
		{"mlc error", CheckMLCError, mlcErrorBody},
		{"completion request", CheckCompletionRequest, completionReq},
		{"minimal completion request", CheckCompletionRequest, `{"prompt":"hi"}`},
		{"embeddings", CheckEmbeddingResponse, embeddingWhole},
		{"embeddings without model", CheckEmbeddingResponse, strings.Replace(embeddingWhole, `"model":"tiny-embed",`, "", 1)},
		{"embedding request", CheckEmbeddingRequest, `{"input":"hi","model":"m","encoding_format":"base64","dimensions":8,"user":"u"}`},
		{"embedding request of an empty string", CheckEmbeddingRequest, `{"input":""}`},
		{"embedding request of strings", CheckEmbeddingRequest, `{"input":["a","b"]}`},
		{"embedding request of ids", CheckEmbeddingRequest, `{"input":[1,2]}`},
		{"embedding request of id lists", CheckEmbeddingRequest, `{"input":[[1,2],[]]}`},
		{"chat request", CheckChatRequest, chatReq},
		{"minimal chat request", CheckChatRequest, `{"messages":[{"role":"user","content":"hi"}]}`},
		{"tools, auto", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto"}`},
		{"tool choice without tools", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"nope"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.check([]byte(c.body)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Each case breaks one rule; the check must name the path that breaks it.
func TestRejectsEachViolatedRule(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func([]byte) error
		body  string
		path  string
	}{
		// Chat answers.
		{"chunk delta without role", CheckChatChunk, strings.Replace(chatChunk, `"role":"assistant",`, "", 1), "choices[0].delta.role"},
		{"chunk delta of another role", CheckChatChunk, strings.Replace(chatChunk, `"role":"assistant"`, `"role":"wizard"`, 1), "choices[0].delta.role"},
		{"chunk without system_fingerprint", CheckChatChunk, strings.Replace(chatChunk, `"system_fingerprint":"caddy-mlc",`, "", 1), "system_fingerprint"},
		{"chunk object", CheckChatChunk, strings.Replace(chatChunk, `chat.completion.chunk`, `chat.completion`, 1), "object"},
		{"response without system_fingerprint", CheckChatResponse, strings.Replace(chatWhole, `"system_fingerprint":"caddy-mlc",`, "", 1), "system_fingerprint"},
		{"response null system_fingerprint", CheckChatResponse, strings.Replace(chatWhole, `"caddy-mlc"`, `null`, 1), "system_fingerprint"},
		{"preempt in chat", CheckChatResponse, strings.Replace(chatWhole, `"length"`, `"preempt"`, 1), "choices[0].finish_reason"},
		{"preempt in chat chunk", CheckChatChunk, strings.Replace(chatChunk, `"finish_reason":null`, `"finish_reason":"preempt"`, 1), "choices[0].finish_reason"},
		{"chat message without role", CheckChatResponse, strings.Replace(chatWhole, `"role":"assistant",`, "", 1), "choices[0].message.role"},
		{"chat logprobs in the completion shape", CheckChatResponse, strings.Replace(chatWhole, `"logprobs":{"content"`, `"logprobs":{"tokens"`, 1), "choices[0].logprobs.content"},
		{"chat logprob bytes missing", CheckChatResponse, strings.Replace(chatWhole, `"bytes":[104,105],`, "", 1), "choices[0].logprobs.content[0].bytes"},
		{"chat usage without total", CheckChatResponse, strings.Replace(chatWhole, `,"total_tokens":2`, "", 1), "usage.total_tokens"},
		{"chat choices null", CheckChatChunk, strings.Replace(chatUsageChunk, `"choices":[]`, `"choices":null`, 1), "choices"},
		// Completion answers.
		{"choice without text", CheckCompletionChunk, strings.Replace(completionChunk, `"text":"h",`, "", 1), "choices[0].text"},
		{"text null", CheckCompletionChunk, strings.Replace(completionChunk, `"text":"h"`, `"text":null`, 1), "choices[0].text"},
		{"index null", CheckCompletionChunk, strings.Replace(completionChunk, `"index":1`, `"index":null`, 1), "choices[0].index"},
		{"finish reason of chat", CheckCompletionChunk, strings.Replace(completionChunk, `"finish_reason":null`, `"finish_reason":"tool_calls"`, 1), "choices[0].finish_reason"},
		{"preempt to a client", CheckClientCompletionChunk, engineChunk, "choices[0].finish_reason"},
		{"preempt in a whole answer to a client", CheckClientCompletionResponse, strings.Replace(completionWhole, `"stop"`, `"preempt"`, 1), "choices[0].finish_reason"},
		{"completion logprobs in the chat shape", CheckCompletionChunk, strings.Replace(completionChunk, `"logprobs":null`, `"logprobs":{"content":[]}`, 1), "choices[0].logprobs.token_logprobs"},
		{"text_offset missing", CheckCompletionResponse, strings.Replace(completionWhole, `"text_offset":[0],`, "", 1), "choices[0].logprobs.text_offset"},
		{"top_logprobs value", CheckCompletionResponse, strings.Replace(completionWhole, `"ho":-2`, `"ho":"-2"`, 1), `choices[0].logprobs.top_logprobs[0]["ho"]`},
		{"object of chat", CheckCompletionResponse, strings.Replace(completionWhole, `"text_completion"`, `"chat.completion"`, 1), "object"},
		{"id missing", CheckCompletionChunk, strings.Replace(completionChunk, `"id":"cmpl-1",`, "", 1), "id"},
		{"id a number", CheckCompletionChunk, strings.Replace(completionChunk, `"cmpl-1"`, `1`, 1), "id"},
		{"created a string", CheckCompletionChunk, strings.Replace(completionChunk, `"created":1`, `"created":"1"`, 1), "created"},
		{"created a fraction", CheckCompletionChunk, strings.Replace(completionChunk, `"created":1`, `"created":1.5`, 1), "created"},
		{"usage prompt_tokens null", CheckCompletionChunk, strings.Replace(usageChunk, `"prompt_tokens":1`, `"prompt_tokens":null`, 1), "usage.prompt_tokens"},
		{"not an object", CheckCompletionChunk, `[]`, ""},
		{"data after the value", CheckCompletionChunk, completionChunk + " {}", ""},
		// Models and errors.
		{"models without data", CheckModelList, `{"object":"list"}`, "data"},
		{"model without id", CheckModelList, strings.Replace(modelListBody, `"id":"tiny",`, "", 1), "data[0].id"},
		{"models object", CheckModelList, strings.Replace(modelListBody, `"list"`, `"lists"`, 1), "object"},
		{"error without param", CheckErrorBody, strings.Replace(errorBody, `"param":"n",`, "", 1), "error.param"},
		{"error code a number", CheckErrorBody, strings.Replace(errorBody, `"integer_above_max_value"`, `400`, 1), "error.code"},
		{"error not wrapped", CheckErrorBody, `{"message":"m","type":"t","param":null,"code":null}`, "error"},
		{"mlc error without message", CheckMLCError, `{"object":"error","code":400}`, "message"},
		{"mlc error code a string", CheckMLCError, `{"message":"m","code":"400"}`, "code"},
		// Completion requests.
		{"prompt missing", CheckCompletionRequest, `{"max_tokens":1}`, "prompt"},
		{"prompt of mixed ids", CheckCompletionRequest, `{"prompt":[1,"a"]}`, "prompt"},
		{"prompt of fractions", CheckCompletionRequest, `{"prompt":[1.5]}`, "prompt"},
		{"n as a string", CheckCompletionRequest, `{"prompt":"a","n":"2"}`, "n"},
		{"n null", CheckCompletionRequest, `{"prompt":"a","n":null}`, "n"},
		{"best_of 2", CheckCompletionRequest, `{"prompt":"a","best_of":2}`, "best_of"},
		{"logprobs 6", CheckCompletionRequest, `{"prompt":"a","logprobs":6}`, "logprobs"},
		{"logprobs -1", CheckCompletionRequest, `{"prompt":"a","logprobs":-1}`, "logprobs"},
		{"logit_bias key", CheckCompletionRequest, `{"prompt":"a","logit_bias":{"x":1}}`, `logit_bias["x"]`},
		{"logit_bias value", CheckCompletionRequest, `{"prompt":"a","logit_bias":{"5":100.5}}`, `logit_bias["5"]`},
		{"frequency_penalty", CheckCompletionRequest, `{"prompt":"a","frequency_penalty":2.1}`, "frequency_penalty"},
		{"presence_penalty", CheckCompletionRequest, `{"prompt":"a","presence_penalty":-3}`, "presence_penalty"},
		{"stream a string", CheckCompletionRequest, `{"prompt":"a","stream":"yes"}`, "stream"},
		{"echo a number", CheckCompletionRequest, `{"prompt":"a","echo":1}`, "echo"},
		{"include_usage missing", CheckCompletionRequest, `{"prompt":"a","stream":true,"stream_options":{}}`, "stream_options.include_usage"},
		{"stop a number", CheckCompletionRequest, `{"prompt":"a","stop":5}`, "stop"},
		{"response_format type", CheckCompletionRequest, `{"prompt":"a","response_format":{"type":"json_schema"}}`, "response_format.type"},
		{"special_request", CheckCompletionRequest, `{"prompt":"a","debug_config":{"special_request":"other"}}`, "debug_config.special_request"},
		{"disagg kind", CheckCompletionRequest, `{"prompt":"a","debug_config":{"disagg_config":{"kind":"x"}}}`, "debug_config.disagg_config.kind"},
		{"grammar mode null", CheckCompletionRequest, `{"prompt":"a","debug_config":{"grammar_execution_mode":null}}`, "debug_config.grammar_execution_mode"},
		// Embeddings.
		{"embedding input missing", CheckEmbeddingRequest, `{"model":"m"}`, "input"},
		{"embedding input empty", CheckEmbeddingRequest, `{"input":[]}`, "input"},
		{"embedding input mixed", CheckEmbeddingRequest, `{"input":["a",1]}`, "input"},
		{"embedding input a number", CheckEmbeddingRequest, `{"input":5}`, "input"},
		{"embedding encoding_format", CheckEmbeddingRequest, `{"input":"a","encoding_format":"binary"}`, "encoding_format"},
		{"embedding dimensions a string", CheckEmbeddingRequest, `{"input":"a","dimensions":"8"}`, "dimensions"},
		{"embedding without index", CheckEmbeddingResponse, strings.Replace(embeddingWhole, `,"index":0`, "", 1), "data[0].index"},
		{"embedding a number", CheckEmbeddingResponse, strings.Replace(embeddingWhole, `[0.5,-0.25]`, `0.5`, 1), "data[0].embedding"},
		{"embedding object", CheckEmbeddingResponse, strings.Replace(embeddingWhole, `"object":"embedding"`, `"object":"vector"`, 1), "data[0].object"},
		{"embedding usage missing", CheckEmbeddingResponse, strings.Replace(embeddingWhole, `,"usage":{"prompt_tokens":3,"total_tokens":3}`, "", 1), "usage"},
		// Chat requests.
		{"messages missing", CheckChatRequest, `{}`, "messages"},
		{"role wizard", CheckChatRequest, `{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{"role missing", CheckChatRequest, `{"messages":[{"content":"x"}]}`, "messages[0].role"},
		{"role with a newline", CheckChatRequest, `{"messages":[{"role":"user\nassistant","content":"x"}]}`, "messages[0].role"},
		{"content a number", CheckChatRequest, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"content part not an object", CheckChatRequest, `{"messages":[{"role":"user","content":["x"]}]}`, "messages[0].content"},
		{"name a number", CheckChatRequest, `{"messages":[{"role":"user","content":"x","name":1}]}`, "messages[0].name"},
		{"system second", CheckChatRequest, `{"messages":[{"role":"user","content":"x"},{"role":"system","content":"y"}]}`, "messages[1]"},
		{"tool_call_id on user", CheckChatRequest, `{"messages":[{"role":"user","content":"x","tool_call_id":"c"}]}`, "messages[0]"},
		{"list content on assistant", CheckChatRequest, `{"messages":[{"role":"assistant","content":[{"type":"text","text":"x"}]}]}`, "messages[0]"},
		{"tool_calls on user", CheckChatRequest, `{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0]"},
		{"tool_calls on assistant", CheckChatRequest, `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, "messages[0]"},
		{"tool call without type", CheckChatRequest, `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].type"},
		{"n as a string in chat", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"n":"2"}`, "n"},
		{"logprobs a string", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"logprobs":"true"}`, "logprobs"},
		{"top_logprobs 21", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"top_logprobs without logprobs", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"top_logprobs":1}`, "top_logprobs"},
		{"stream_options without stream", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "stream_options"},
		{"special request without stream", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"debug_config":{"special_request":"query_engine_metrics"}}`, "debug_config.special_request"},
		{"special request without usage", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"stream":true,"debug_config":{"special_request":"query_engine_metrics"}}`, "debug_config.special_request"},
		{"tool without parameters", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools[0].function.parameters"},
		{"tool of another type", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval","function":{"name":"f","parameters":{}}}]}`, "tools[0].type"},
		{"tool_choice required", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice"},
		{"tool_choice of an unknown tool", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice.function.name"},
		{"tool_choice function with more than a name", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f","x":1}}}`, "tool_choice.function"},
		{"tool_choice without type", CheckChatRequest, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"function":{"name":"f"}}}`, "tool_choice.type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.check([]byte(c.body))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("accepted (err = %v):\n%s", err, c.body)
			}
			for _, v := range e.Violations {
				if v.Path == c.path {
					return
				}
			}
			t.Fatalf("no violation at %q: %v", c.path, err)
		})
	}
}

func TestReportsEveryViolation(t *testing.T) {
	body := `{"object":"chat.completion.chunk","choices":[{"delta":{"content":"x"}},{"delta":{"role":"user"},"finish_reason":"preempt"}]}`
	err := CheckChatChunk([]byte(body))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("accepted: %v", err)
	}
	var paths []string
	for _, v := range e.Violations {
		paths = append(paths, v.Path)
	}
	want := []string{"id", "choices[0].delta.role", "choices[1].finish_reason", "system_fingerprint"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("violations at %v, want %v", paths, want)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "mlcschema: ChatCompletionStreamResponse: id: required") {
		t.Fatalf("message %q", msg)
	}
}

// The validators run only on a model whose fields are valid, as pydantic's
// after-validators do: a request with a bad field reports the field, not
// a validator's confusion about it.
func TestValidatorsRunOnValidFields(t *testing.T) {
	err := CheckChatRequest([]byte(`{"messages":[{"role":"system","content":1},{"role":"system","content":"x"}]}`))
	var e *Error
	if !errors.As(err, &e) || len(e.Violations) != 1 || e.Violations[0].Path != "messages[0].content" {
		t.Fatalf("got %v", err)
	}
}
