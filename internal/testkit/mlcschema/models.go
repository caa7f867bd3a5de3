package mlcschema

// MLC-LLM's protocol models, restated. Each var names its Python class;
// the field lists follow the class bodies in order. A field's mode says
// what its declaration says: "x: T" is required, "x: Optional[T]" with no
// default is required but may be null, "x: Optional[T] = None" may be
// absent or null, "x: T = v" may be absent but not null. The models repeat
// each other's fields (id, created, model, usage...) as the Python classes
// do: a table per class reads against its class.

func f(name string, t typ, m mode) field { return field{name: name, t: t, mode: m} }

// Bounds of MLC's logprobs (CHAT_COMPLETION_MAX_TOP_LOGPROBS and
// COMPLETION_MAX_TOP_LOGPROBS), which are OpenAI's.
const (
	chatMaxTopLogprobs       = 20
	completionMaxTopLogprobs = 5
)

var (
	topLogProbs = &model{name: "TopLogProbs", fields: []field{
		f("token", str, required),
		f("logprob", float, required),
		f("bytes", listOf{integ}, requiredOrNull),
	}}
	logProbsContent = &model{name: "LogProbsContent", fields: []field{
		f("token", str, required),
		f("logprob", float, required),
		f("bytes", listOf{integ}, requiredOrNull),
		f("top_logprobs", listOf{topLogProbs}, defaulted),
	}}
	logProbs = &model{name: "LogProbs", fields: []field{
		f("content", listOf{logProbsContent}, required),
	}}
	completionLogProbs = &model{name: "CompletionLogProbs", fields: []field{
		f("text_offset", listOf{integ}, requiredOrNull),
		f("token_logprobs", listOf{float}, required),
		f("tokens", listOf{str}, required),
		f("top_logprobs", listOf{dictOf{val: float}}, required),
	}}
	completionUsage = &model{name: "CompletionUsage", fields: []field{
		f("prompt_tokens", integ, required),
		f("completion_tokens", integ, required),
		f("total_tokens", integ, required),
		f("extra", dictOf{val: anyV}, optional),
	}}
	streamOptions = &model{name: "StreamOptions", fields: []field{
		f("include_usage", boolean, requiredOrNull),
	}}
)

// v1/models. MLC declares object as str = "model" and ListResponse's as
// str = "list"; OpenAI fixes both, and so does this package.
var (
	modelResponse = &model{name: "ModelResponse", fields: []field{
		f("id", str, required),
		f("created", integ, defaulted),
		f("object", literal{"model"}, defaulted),
		f("owned_by", str, defaulted),
	}}
	// modelList is ListResponse whose data is a list of ModelResponse,
	// which is what MLC's server puts there (the model says List[Any]).
	modelList = &model{name: "ListResponse", fields: []field{
		f("object", literal{"list"}, defaulted),
		f("data", listOf{modelResponse}, required),
	}}
)

// v1/embeddings. MLC declares EmbeddingObject's object as str =
// "embedding" and EmbeddingResponse's as str = "list"; OpenAI fixes both,
// and so does this package.
var (
	embeddingRequest = &model{name: "EmbeddingRequest", fields: []field{
		f("input", union{str, listOf{str}, listOf{integ}, listOf{listOf{integ}}}, required),
		f("model", str, optional),
		f("encoding_format", literal{"float", "base64"}, defaulted),
		f("dimensions", integ, optional),
		f("user", str, optional),
	}, validators: []validator{checkEmbeddingInput}}

	embeddingObject = &model{name: "EmbeddingObject", fields: []field{
		f("object", literal{"embedding"}, defaulted),
		f("embedding", union{listOf{float}, str}, required),
		f("index", integ, required),
	}}
	embeddingUsage = &model{name: "EmbeddingUsage", fields: []field{
		f("prompt_tokens", integ, required),
		f("total_tokens", integ, required),
	}}
	embeddingResponse = &model{name: "EmbeddingResponse", fields: []field{
		f("object", literal{"list"}, defaulted),
		f("data", listOf{embeddingObject}, required),
		f("model", str, optional),
		f("usage", embeddingUsage, required),
	}}
)

// debug_protocol.py.
var (
	disaggConfig = &model{name: "DisaggConfig", fields: []field{
		f("kind", literal{"prepare_receive", "remote_send", "start_generation"}, optional),
		f("kv_append_metadata", str, optional),
		f("kv_window_begin", integ, optional),
		f("kv_window_end", integ, optional),
		f("dst_group_offset", integ, optional),
	}}
	debugConfig = &model{name: "DebugConfig", fields: []field{
		f("ignore_eos", boolean, defaulted),
		f("pinned_system_prompt", boolean, defaulted),
		f("special_request", literal{"query_engine_metrics"}, optional),
		f("grammar_execution_mode", literal{"constraint", "jump_forward"}, defaulted),
		f("disagg_config", disaggConfig, optional),
	}}
)

// v1/completions.
var (
	responseFormat = &model{name: "RequestResponseFormat", fields: []field{
		f("type", literal{"text", "json_object"}, defaulted),
		f("schema", str, optional),
	}}
	completionRequest = &model{name: "CompletionRequest", fields: []field{
		f("model", str, optional),
		f("prompt", union{str, listOf{integ}}, required),
		f("best_of", integ, defaulted),
		f("echo", boolean, defaulted),
		f("frequency_penalty", float, optional),
		f("presence_penalty", float, optional),
		f("logprobs", integ, optional),
		f("logit_bias", dictOf{intKeys: true, val: float}, optional),
		f("max_tokens", integ, optional),
		f("n", integ, defaulted),
		f("seed", integ, optional),
		f("stop", union{str, listOf{str}}, optional),
		f("stream", boolean, defaulted),
		f("stream_options", streamOptions, optional),
		f("suffix", str, optional),
		f("temperature", float, optional),
		f("top_p", float, optional),
		f("user", str, optional),
		f("response_format", responseFormat, optional),
		f("debug_config", debugConfig, optional),
	}, validators: []validator{checkPenalties, checkLogitBias, checkCompletionLogprobs, checkUnsupportedBestOf}}

	completionChoice = &model{name: "CompletionResponseChoice", fields: []field{
		f("finish_reason", literal{"stop", "length", "preempt"}, optional),
		f("index", integ, defaulted),
		f("logprobs", completionLogProbs, optional),
		f("text", str, required),
	}}
	// completionResponse is both the whole answer and each streamed
	// chunk. MLC declares object as str = "text_completion"; OpenAI fixes
	// it, and so does this package.
	completionResponse = &model{name: "CompletionResponse", fields: []field{
		f("id", str, required),
		f("choices", listOf{completionChoice}, required),
		f("created", integ, defaulted),
		f("model", str, optional),
		f("object", literal{"text_completion"}, defaulted),
		f("usage", completionUsage, optional),
	}}
)

// v1/chat/completions.
var (
	chatFunction = &model{name: "ChatFunction", fields: []field{
		f("description", str, optional),
		f("name", str, required),
		f("parameters", dict, required),
	}}
	chatTool = &model{name: "ChatTool", fields: []field{
		f("type", literal{"function"}, required),
		f("function", chatFunction, required),
	}}
	chatFunctionCall = &model{name: "ChatFunctionCall", fields: []field{
		f("name", str, required),
		f("arguments", dictOf{val: anyV}, optional),
	}}
	chatToolCall = &model{name: "ChatToolCall", fields: []field{
		f("id", str, defaulted),
		f("type", literal{"function"}, required),
		f("function", chatFunctionCall, required),
	}}
	chatMessage = &model{name: "ChatCompletionMessage", fields: []field{
		f("content", union{str, listOf{dict}}, optional),
		f("role", literal{"system", "user", "assistant", "tool"}, required),
		f("name", str, optional),
		f("tool_calls", listOf{chatToolCall}, optional),
		f("tool_call_id", str, optional),
	}}
	chatCompletionRequest = &model{name: "ChatCompletionRequest", fields: []field{
		f("messages", listOf{chatMessage}, required),
		f("model", str, optional),
		f("frequency_penalty", float, optional),
		f("presence_penalty", float, optional),
		f("logprobs", boolean, defaulted),
		f("top_logprobs", integ, defaulted),
		f("logit_bias", dictOf{intKeys: true, val: float}, optional),
		f("max_tokens", integ, optional),
		f("n", integ, defaulted),
		f("seed", integ, optional),
		f("stop", union{str, listOf{str}}, optional),
		f("stream", boolean, defaulted),
		f("stream_options", streamOptions, optional),
		f("temperature", float, optional),
		f("top_p", float, optional),
		f("tools", listOf{chatTool}, optional),
		f("tool_choice", union{literal{"none", "auto"}, dict}, optional),
		f("user", str, optional),
		f("response_format", responseFormat, optional),
		f("debug_config", debugConfig, optional),
	}, validators: []validator{checkPenalties, checkLogitBias, checkChatLogprobs, checkStreamOptions, checkDebugConfig,
		checkMessageValidity, checkFunctionCallUsage}}

	chatFinishReasons = literal{"stop", "length", "tool_calls", "error"}
	chatChoice        = &model{name: "ChatCompletionResponseChoice", fields: []field{
		f("finish_reason", chatFinishReasons, optional),
		f("index", integ, defaulted),
		f("message", chatMessage, required),
		f("logprobs", logProbs, optional),
	}}
	chatStreamChoice = &model{name: "ChatCompletionStreamResponseChoice", fields: []field{
		f("finish_reason", chatFinishReasons, optional),
		f("index", integ, defaulted),
		f("delta", chatMessage, required),
		f("logprobs", logProbs, optional),
	}}
	chatCompletionResponse = &model{name: "ChatCompletionResponse", fields: []field{
		f("id", str, required),
		f("choices", listOf{chatChoice}, required),
		f("created", integ, defaulted),
		f("model", str, optional),
		f("system_fingerprint", str, required),
		f("object", literal{"chat.completion"}, defaulted),
		f("usage", completionUsage, optional),
	}}
	chatStreamResponse = &model{name: "ChatCompletionStreamResponse", fields: []field{
		f("id", str, required),
		f("choices", listOf{chatStreamChoice}, required),
		f("created", integ, defaulted),
		f("model", str, optional),
		f("system_fingerprint", str, required),
		f("object", literal{"chat.completion.chunk"}, defaulted),
		f("usage", completionUsage, optional),
	}}
)

// Errors.
var (
	// mlcError is error_protocol.py's ErrorResponse.
	mlcError = &model{name: "ErrorResponse", fields: []field{
		f("object", str, defaulted),
		f("message", str, required),
		f("code", integ, optional),
	}}
	// openAIError is the body OpenAI answers errors with (and so does the
	// router): every member present, param and code null when unset.
	openAIError = &model{name: "OpenAIErrorBody", fields: []field{
		f("error", &model{name: "OpenAIError", fields: []field{
			f("message", str, required),
			f("type", str, required),
			f("param", str, requiredOrNull),
			f("code", str, requiredOrNull),
		}}, required),
	}}
)
