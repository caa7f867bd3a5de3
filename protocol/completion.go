package protocol

import (
	"encoding/json"
	"maps"
	"slices"
)

// StreamOptions are the options of a streamed response.
type StreamOptions struct {
	// IncludeUsage asks for a last chunk that carries usage and no choices.
	IncludeUsage bool `json:"include_usage"`
}

// CompletionRequest is the body of POST /v1/completions, as MLC-LLM reads
// it. Optional fields are pointers so that "absent" and "zero" differ and an
// absent field is not written when the request is forwarded.
type CompletionRequest struct {
	Model            string             `json:"model,omitempty"`
	Prompt           Prompt             `json:"prompt"`
	BestOf           *int               `json:"best_of,omitempty"`
	Echo             bool               `json:"echo,omitempty"`
	FrequencyPenalty *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64           `json:"presence_penalty,omitempty"`
	Logprobs         *int               `json:"logprobs,omitempty"`
	LogitBias        map[string]float64 `json:"logit_bias,omitempty"`
	MaxTokens        *int               `json:"max_tokens,omitempty"`
	N                *int               `json:"n,omitempty"`
	Seed             *int64             `json:"seed,omitempty"`
	Stop             StopList           `json:"stop,omitempty"`
	Stream           bool               `json:"stream,omitempty"`
	StreamOptions    *StreamOptions     `json:"stream_options,omitempty"`
	Suffix           *string            `json:"suffix,omitempty"`
	Temperature      *float64           `json:"temperature,omitempty"`
	TopP             *float64           `json:"top_p,omitempty"`
	User             *string            `json:"user,omitempty"`
	ResponseFormat   *ResponseFormat    `json:"response_format,omitempty"`
	// DebugConfig is MLC's engine debug configuration. Engines honour it
	// only when started with --enable-debug; the router never forwards a
	// client's.
	DebugConfig *DebugConfig `json:"debug_config,omitempty"`
	// Arrival is caddy-mlc's extension: when the request first reached
	// the router (unix microseconds), the same on every attempt. The
	// built-in engine ranks its work by it: a request it must preempt for
	// KV is the latest arrival, and a resumed one queues ahead of later
	// arrivals, so the oldest request always progresses. MLC's engines
	// ignore it (as any field their protocol does not name). The router
	// sets it on every engine request, never forwarding a client's.
	Arrival int64 `json:"arrival,omitempty"`

	// Extra holds the fields this type does not model; they are written
	// back when the request is encoded.
	Extra Extra `json:"-"`

	// What the router knows of a chat request it serves as this
	// completion, never sent to an engine: how its answer is read for
	// tool calls (nil: it is text), and the request's tools it left out
	// of the prompt.
	ToolCalling  *ToolCalling `json:"-"`
	SkippedTools []string     `json:"-"`
	// Reasoning says the answer begins with the model's reasoning
	// (<think>…</think>: its template has a thinking switch, on), which
	// an API that carries reasoning apart writes so.
	Reasoning bool `json:"-"`
	// SessionKey names the conversation the request continues, as its
	// client gave it (OpenAI's prompt_cache_key, the session of
	// Anthropic's metadata.user_id): a routing hint, never sent to an
	// engine nor logged as it is ("": none).
	SessionKey string `json:"-"`
	// Grammar is the grammar engine of the engines that serve the
	// request, which checks its response format.
	Grammar SchemaGrammar `json:"-"`
}

// KeyPromptCacheKey is OpenAI's prompt_cache_key: the key its chat and
// Responses APIs route a request's cache by, which the router reads on
// completions too.
const KeyPromptCacheKey = "prompt_cache_key"

// TakeSessionKey moves a completion's prompt_cache_key out of the fields
// forwarded to engines into SessionKey; one that is not a string is
// refused.
func (r *CompletionRequest) TakeSessionKey() *Error {
	raw, ok := r.Extra[KeyPromptCacheKey]
	if !ok {
		return nil
	}
	delete(r.Extra, KeyPromptCacheKey)
	if jsonKind(raw) == kindNull {
		return nil
	}
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &r.SessionKey) != nil {
		return InvalidRequest(KeyPromptCacheKey, "prompt_cache_key must be a string").WithCode(CodeInvalidType)
	}
	return nil
}

// completionRequestFields is CompletionRequest without its JSON methods.
type completionRequestFields CompletionRequest

// UnmarshalJSON decodes the request, keeping unknown fields in Extra.
func (r *CompletionRequest) UnmarshalJSON(b []byte) error {
	return decodeExtra(b, (*completionRequestFields)(r), &r.Extra)
}

// MarshalJSON encodes the request with its unknown fields.
func (r CompletionRequest) MarshalJSON() ([]byte, error) {
	return joinExtra(completionRequestFields(r), r.Extra)
}

// marshalWith encodes the request with more fields (the microserving ones).
func (r CompletionRequest) marshalWith(fields any) ([]byte, error) {
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var more Extra
	if err := json.Unmarshal(b, &more); err != nil {
		return nil, err
	}
	return joinExtra(completionRequestFields(r), more, r.Extra)
}

// Clone returns a deep copy of the request, safe to modify.
func (r *CompletionRequest) Clone() *CompletionRequest {
	c := *r
	c.Prompt.IDs = slices.Clone(r.Prompt.IDs)
	c.Stop = slices.Clone(r.Stop)
	c.LogitBias = maps.Clone(r.LogitBias)
	if r.StreamOptions != nil {
		so := *r.StreamOptions
		c.StreamOptions = &so
	}
	if r.DebugConfig != nil {
		c.DebugConfig = r.DebugConfig.Clone()
	}
	if r.ResponseFormat != nil {
		rf := *r.ResponseFormat
		c.ResponseFormat = &rf
	}
	c.Extra = r.Extra.Clone()
	return &c
}

// MaxTokensOr returns max_tokens, or def when it is absent.
func (r *CompletionRequest) MaxTokensOr(def int) int {
	if r.MaxTokens == nil {
		return def
	}
	return *r.MaxTokens
}

// NOr returns n, or 1 when it is absent.
func (r *CompletionRequest) NOr() int {
	if r.N == nil {
		return 1
	}
	return *r.N
}

// IncludeUsage reports whether a streamed response ends with a usage chunk.
func (r *CompletionRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// Finish reasons of a completion choice.
const (
	FinishStop    = "stop"
	FinishLength  = "length"
	FinishPreempt = "preempt" // MLC's own: the engine evicted the request; retry it
	// FinishToolCalls ends a chat answer whose text the router read as
	// tool calls; engines never send it.
	FinishToolCalls = "tool_calls"
)

// CompletionChoice is one generated sequence (or a piece of it, in a
// stream).
type CompletionChoice struct {
	Index int    `json:"index"`
	Text  string `json:"text"`
	// FinishReason is null while a stream goes on, then "stop", "length"
	// or, from an engine only, "preempt".
	FinishReason *string `json:"finish_reason"`
	// Logprobs are those of the choice's tokens (of this chunk's, in a
	// stream), when the request asked for them; null otherwise.
	Logprobs *CompletionLogprobs `json:"logprobs"`
}

// Finished returns the finish reason, or "" while the choice goes on.
func (c CompletionChoice) Finished() string {
	if c.FinishReason == nil {
		return ""
	}
	return *c.FinishReason
}

// Usage counts the tokens of a request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is what the router answers of the prompt's
	// cached tokens (see Usage.WithCached); engines do not send it.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// Extra is MLC's engine-specific usage data (prefix_matched_length,
	// kv_append_metadata, prompt_length, engine metrics...), which engines
	// send to the router. It is not an OpenAI field: what the router
	// answers clients leaves it empty, and an empty Extra is not written.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// CompletionResponse is a whole (non-streamed) completion, or one chunk of
// a streamed one: both have object "text_completion".
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ObjectTextCompletion is the object name of completion responses.
const ObjectTextCompletion = "text_completion"
