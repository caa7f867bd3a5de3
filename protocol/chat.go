package protocol

import (
	"encoding/json"
	"math"
)

// ChatCompletionRequest is the body of POST /v1/chat/completions.
//
// Messages, Tools and ToolChoice are kept raw: Validate checks them as
// MLC-LLM's ChatCompletionMessage and ChatTool models and its
// check_message_validity do, and the chat template package decodes the
// messages it renders (engine/chat.Message), so they are decoded once,
// by the code that uses them.
type ChatCompletionRequest struct {
	Model               string             `json:"model,omitempty"`
	Messages            []json.RawMessage  `json:"messages"`
	FrequencyPenalty    *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64           `json:"presence_penalty,omitempty"`
	Logprobs            bool               `json:"logprobs,omitempty"`
	TopLogprobs         *int               `json:"top_logprobs,omitempty"`
	LogitBias           map[string]float64 `json:"logit_bias,omitempty"`
	MaxTokens           *int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int               `json:"max_completion_tokens,omitempty"`
	N                   *int               `json:"n,omitempty"`
	Seed                *int64             `json:"seed,omitempty"`
	Stop                StopList           `json:"stop,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *StreamOptions     `json:"stream_options,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Tools               []json.RawMessage  `json:"tools,omitempty"`
	ToolChoice          json.RawMessage    `json:"tool_choice,omitempty"`
	User                *string            `json:"user,omitempty"`
	PromptCacheKey      *string            `json:"prompt_cache_key,omitempty"`
	ResponseFormat      *ResponseFormat    `json:"response_format,omitempty"`
	// ChatTemplateKwargs are extra template variables (e.g.
	// enable_thinking), as vLLM and SGLang name them.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	DebugConfig        *DebugConfig   `json:"debug_config,omitempty"`

	// Thinking is whether the client asked for the model's reasoning
	// (Anthropic's thinking): the router sets the template's thinking
	// switch from it when the template has one. nil: the template's
	// default.
	Thinking *bool `json:"-"`
	// SkippedTools are tools of the request (of the Messages or
	// Responses API) left out of the prompt: the fleet cannot run them.
	SkippedTools []string `json:"-"`
	// ToolSchemaParams name each tool's schema as the client's API does
	// (the Messages API's "tools[2].input_schema"), for errors; absent,
	// chat's "tools[i].function.parameters".
	ToolSchemaParams []string `json:"-"`
	// AllowedTools are the functions an allowed_tools tool_choice lets
	// the model call (see allowedtools.go), set by Validate; nil: any.
	AllowedTools []string `json:"-"`
	// Grammar is the grammar engine of the engines that serve the
	// request, which checks its response format and required call.
	Grammar SchemaGrammar `json:"-"`

	// Extra holds the fields this type does not model.
	Extra Extra `json:"-"`

	// engineFormat is the response format as engines read it (see
	// ResponseFormat.Engine), once Validate checked it.
	engineFormat *ResponseFormat
}

type chatRequestFields ChatCompletionRequest

// UnmarshalJSON decodes the request, keeping unknown fields in Extra.
func (r *ChatCompletionRequest) UnmarshalJSON(b []byte) error {
	return decodeExtra(b, (*chatRequestFields)(r), &r.Extra)
}

// MarshalJSON encodes the request with its unknown fields.
func (r ChatCompletionRequest) MarshalJSON() ([]byte, error) {
	return joinExtra(chatRequestFields(r), r.Extra)
}

// Validate checks the request as MLC-LLM's ChatCompletionRequest model and
// its message checks do, within OpenAI's bounds, returning a 400 error that
// names the first bad field. When only max_completion_tokens is given, it
// becomes MaxTokens.
func (r *ChatCompletionRequest) Validate() *Error {
	if e := validateMessages(r.Messages); e != nil {
		return e
	}
	if e := intRange("max_completion_tokens", r.MaxCompletionTokens, 1, math.MaxInt); e != nil {
		return e
	}
	if r.MaxTokens == nil {
		r.MaxTokens = r.MaxCompletionTokens
	}
	s := Sampling{MaxTokens: r.MaxTokens, N: r.N, FrequencyPenalty: r.FrequencyPenalty, PresencePenalty: r.PresencePenalty,
		Temperature: r.Temperature, TopP: r.TopP, LogitBias: r.LogitBias, Stop: r.Stop}
	if e := s.Validate(); e != nil {
		return e
	}
	if e := intRange("top_logprobs", r.TopLogprobs, 0, MaxChatTopLogprobs); e != nil {
		return e
	}
	if r.TopLogprobs != nil && *r.TopLogprobs > 0 && !r.Logprobs {
		return InvalidRequest("top_logprobs", "top_logprobs is only allowed when logprobs is true").WithCode(CodeInvalidValue)
	}
	if e := validateStreamOptions(r.Stream, r.StreamOptions); e != nil {
		return e
	}
	allowed, e := validateTools(r.Tools, r.ToolChoice)
	if e != nil {
		return e
	}
	r.AllowedTools = allowed
	rf, e := r.ResponseFormat.EngineFor("response_format", r.Grammar)
	if e != nil {
		return e
	}
	r.engineFormat = rf
	if e := r.DebugConfig.Validate(); e != nil {
		return e
	}
	// MLC-LLM answers a special request (engine metrics) in the usage of
	// a stream's last chunk, so it needs both.
	if d := r.DebugConfig; d != nil && d.SpecialRequest != nil && (!r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage) {
		return InvalidRequest("debug_config.special_request", "debug_config.special_request needs stream: true and stream_options.include_usage: true").WithCode(CodeInvalidValue)
	}
	return nil
}

// Completion returns the completion request that generates this chat's
// answer from prompt (the rendered, tokenized conversation). logprobs
// with top_logprobs k becomes the completion's logprobs k (0 without
// top_logprobs): the logprob of every token and its k alternatives.
func (r *ChatCompletionRequest) Completion(prompt []int) *CompletionRequest {
	req := &CompletionRequest{
		Model: r.Model, Prompt: TokenPrompt(prompt), FrequencyPenalty: r.FrequencyPenalty,
		PresencePenalty: r.PresencePenalty, LogitBias: r.LogitBias, MaxTokens: r.MaxTokens, N: r.N,
		Seed: r.Seed, Stop: r.Stop, Stream: r.Stream, StreamOptions: r.StreamOptions,
		Temperature: r.Temperature, TopP: r.TopP, User: r.User, SkippedTools: r.SkippedTools,
	}
	if r.PromptCacheKey != nil {
		req.SessionKey = *r.PromptCacheKey
	}
	req.ResponseFormat = r.engineFormat
	if req.ResponseFormat == nil && r.ResponseFormat != nil {
		req.ResponseFormat, _ = r.ResponseFormat.EngineFor("response_format", r.Grammar) // a request not validated: an error is Validate's
	}
	if r.Logprobs {
		k := 0
		if r.TopLogprobs != nil {
			k = *r.TopLogprobs
		}
		req.Logprobs = &k
	}
	return req
}

// Object names of chat completion answers.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
)
