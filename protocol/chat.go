package protocol

import "encoding/json"

// ChatCompletionRequest is the body of POST /v1/chat/completions. Messages
// are kept raw: the chat template package decodes them.
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
	ResponseFormat      *ResponseFormat    `json:"response_format,omitempty"`
	// ChatTemplateKwargs are extra template variables (e.g.
	// enable_thinking), as vLLM and SGLang name them.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	DebugConfig        *DebugConfig   `json:"debug_config,omitempty"`

	// Extra holds the fields this type does not model.
	Extra Extra `json:"-"`
}

type chatRequestFields ChatCompletionRequest

// UnmarshalJSON decodes the request, keeping unknown fields in Extra.
func (r *ChatCompletionRequest) UnmarshalJSON(b []byte) error {
	var f chatRequestFields
	extra, err := splitExtra(b, &f)
	if err != nil {
		return err
	}
	*r = ChatCompletionRequest(f)
	r.Extra = extra
	return nil
}

// MarshalJSON encodes the request with its unknown fields.
func (r ChatCompletionRequest) MarshalJSON() ([]byte, error) {
	return joinExtra(chatRequestFields(r), r.Extra)
}

// Validate checks the request's fields.
func (r *ChatCompletionRequest) Validate() *Error {
	if len(r.Messages) == 0 {
		return InvalidRequest("messages", "messages is required and must not be empty")
	}
	if r.MaxTokens == nil {
		r.MaxTokens = r.MaxCompletionTokens
	}
	s := Sampling{MaxTokens: r.MaxTokens, N: r.N, FrequencyPenalty: r.FrequencyPenalty, PresencePenalty: r.PresencePenalty,
		Temperature: r.Temperature, TopP: r.TopP, LogitBias: r.LogitBias}
	if e := s.Validate(); e != nil {
		return e
	}
	if r.StreamOptions != nil && !r.Stream {
		return InvalidRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	if rf := r.ResponseFormat; rf != nil && rf.Type != "text" {
		return InvalidRequest("response_format", "response_format %q is not supported by this server", rf.Type)
	}
	return nil
}

// Completion returns the completion request that generates this chat's
// answer from prompt (the rendered, tokenized conversation).
func (r *ChatCompletionRequest) Completion(prompt []int) *CompletionRequest {
	return &CompletionRequest{
		Model: r.Model, Prompt: TokenPrompt(prompt), FrequencyPenalty: r.FrequencyPenalty,
		PresencePenalty: r.PresencePenalty, LogitBias: r.LogitBias, MaxTokens: r.MaxTokens, N: r.N,
		Seed: r.Seed, Stop: r.Stop, Stream: r.Stream, StreamOptions: r.StreamOptions,
		Temperature: r.Temperature, TopP: r.TopP, User: r.User,
	}
}

// ChatMessage is a message of a chat completion answer.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatDelta is the piece of a message a chat chunk carries.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// ChatChoice is one answer of a whole chat completion.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      ChatMessage     `json:"message"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// ChatChunkChoice is one answer's piece in a chat chunk.
type ChatChunkChoice struct {
	Index        int             `json:"index"`
	Delta        ChatDelta       `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// ChatCompletionResponse is a whole chat completion.
type ChatCompletionResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatCompletionChunk is one event of a streamed chat completion.
type ChatCompletionChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
}

// Object names of chat completion answers.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	PathChatCompletions       = "/v1/chat/completions"
)
