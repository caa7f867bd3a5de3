package mlcschema

import (
	"math"
	"strconv"
)

// The validators of MLC's request models, and the checks its server runs
// on a parsed request before serving it (check_message_validity,
// check_function_call_usage, openai_api_get_unsupported_fields). Each
// sees an object whose fields have their declared types.

// checkPenalties is check_penalty_range: a non-zero penalty is in [-2, 2].
func checkPenalties(c *checker, path string, obj map[string]any) {
	for _, name := range []string{"frequency_penalty", "presence_penalty"} {
		if v, ok := asFloat(obj[name]); ok && v != 0 && (v < -2 || v > 2) {
			c.fail(join(path, name), "penalty value should be in range [-2, 2], got %v", v)
		}
	}
}

// checkLogitBias is check_logit_bias: every bias is in [-100, 100].
func checkLogitBias(c *checker, path string, obj map[string]any) {
	bias, _ := obj["logit_bias"].(map[string]any)
	for _, k := range sortedKeys(bias) {
		if v, ok := asFloat(bias[k]); ok && math.Abs(v) > 100 {
			c.fail(join(path, "logit_bias")+"["+strconv.Quote(k)+"]", "logit bias value should be in range [-100, 100], got %v", v)
		}
	}
}

// checkCompletionLogprobs is CompletionRequest.check_logprobs.
func checkCompletionLogprobs(c *checker, path string, obj map[string]any) {
	if n, ok := asInt(obj["logprobs"]); ok && (n < 0 || n > completionMaxTopLogprobs) {
		c.fail(join(path, "logprobs"), `"logprobs" must be in range [0, %d], got %d`, completionMaxTopLogprobs, n)
	}
}

// checkUnsupportedBestOf is openai_api_get_unsupported_fields: MLC's
// server refuses a request whose best_of is not its default, 1.
func checkUnsupportedBestOf(c *checker, path string, obj map[string]any) {
	if n, ok := asInt(obj["best_of"]); ok && n != 1 {
		c.fail(join(path, "best_of"), "unsupported field: best_of must be 1, got %d", n)
	}
}

// checkChatLogprobs is ChatCompletionRequest.check_logprobs.
func checkChatLogprobs(c *checker, path string, obj map[string]any) {
	top, _ := asInt(obj["top_logprobs"])
	if top < 0 || top > chatMaxTopLogprobs {
		c.fail(join(path, "top_logprobs"), `"top_logprobs" must be in range [0, %d], got %d`, chatMaxTopLogprobs, top)
	}
	if logprobs, _ := obj["logprobs"].(bool); !logprobs && top > 0 {
		c.fail(join(path, "top_logprobs"), `"logprobs" must be true to support "top_logprobs"`)
	}
}

// checkStreamOptions is check_stream_options: stream_options needs a
// stream.
func checkStreamOptions(c *checker, path string, obj map[string]any) {
	if stream, _ := obj["stream"].(bool); obj["stream_options"] != nil && !stream {
		c.fail(join(path, "stream_options"), "stream must be true when stream_options is present")
	}
}

// checkDebugConfig is check_debug_config: a special request is answered
// in a stream's usage, so it needs stream and include_usage.
func checkDebugConfig(c *checker, path string, obj map[string]any) {
	dc, _ := obj["debug_config"].(map[string]any)
	if dc == nil || dc["special_request"] == nil {
		return
	}
	if stream, _ := obj["stream"].(bool); !stream {
		c.fail(join(path, "debug_config.special_request"), "DebugConfig.special_request requires stream=True")
		return
	}
	so, _ := obj["stream_options"].(map[string]any)
	if include, _ := so["include_usage"].(bool); !include {
		c.fail(join(path, "debug_config.special_request"), "DebugConfig.special_request requires include_usage in stream_options")
	}
}

// checkMessageValidity is check_message_validity.
func checkMessageValidity(c *checker, path string, obj map[string]any) {
	msgs, _ := obj["messages"].([]any)
	for i, m := range msgs {
		msg, _ := m.(map[string]any)
		at := join(path, "messages") + "[" + strconv.Itoa(i) + "]"
		role, _ := msg["role"].(string)
		if role == "system" && i != 0 {
			c.fail(at, "system prompt at position %d in the message list is invalid", i)
		}
		if msg["tool_call_id"] != nil && role != "tool" {
			c.fail(at, "non-tool message having `tool_call_id` is invalid")
		}
		if _, isList := msg["content"].([]any); isList && role != "user" {
			c.fail(at, "non-user message having a list of content is invalid")
		}
		if msg["tool_calls"] != nil {
			if role != "assistant" {
				c.fail(at, "non-assistant message having `tool_calls` is invalid")
			} else {
				c.fail(at, "assistant message having `tool_calls` is not supported yet")
			}
		}
	}
}

// checkFunctionCallUsage is check_function_call_usage, whose lookups of
// missing keys would raise in Python: each is a refusal here.
func checkFunctionCallUsage(c *checker, path string, obj map[string]any) {
	tools, _ := obj["tools"].([]any)
	if obj["tools"] == nil || obj["tool_choice"] == "none" {
		return
	}
	choice, isDict := obj["tool_choice"].(map[string]any)
	if !isDict {
		return // "auto" or absent: every tool is offered
	}
	at := join(path, "tool_choice")
	if choice["type"] != "function" {
		c.fail(at+".type", "only 'function' tool choice is supported")
		return
	}
	fn, ok := choice["function"].(map[string]any)
	if !ok {
		c.fail(at+".function", "want an object with the name of a tool, got %s", kind(choice["function"]))
		return
	}
	if len(fn) > 1 {
		c.fail(at+".function", "only one tool is supported when tool_choice is specified")
		return
	}
	name, ok := fn["name"]
	if !ok {
		c.fail(at+".function.name", "required")
		return
	}
	for _, t := range tools {
		tool, _ := t.(map[string]any)
		tf, _ := tool["function"].(map[string]any)
		if tf["name"] == name {
			return
		}
	}
	c.fail(at+".function.name", "the tool_choice function %s is not found in the tools list", show(name))
}

// checkEmbeddingInput is EmbeddingRequest.validate_input: an input list
// must not be empty (an empty string is an input).
func checkEmbeddingInput(c *checker, path string, obj map[string]any) {
	if list, ok := obj["input"].([]any); ok && len(list) == 0 {
		c.fail(join(path, "input"), "Input list must not be empty.")
	}
}
