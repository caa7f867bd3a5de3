package protocol

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The answers of Anthropic's Messages API: the message whole, the events
// of its stream, and errors in Anthropic's shape.

// MessagesResponse is a whole answer of POST /v1/messages, and the
// message of a stream's message_start.
type MessagesResponse struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"` // "message"
	Role         string          `json:"role"`
	Content      []MessagesBlock `json:"content"`
	Model        string          `json:"model"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        MessagesUsage   `json:"usage"`
}

// MessagesBlock is a content block of an answer: text, a tool_use (a
// call: its id, the tool's name and its input, a JSON object), or
// thinking (the model's reasoning; its signature is empty: the router
// signs nothing).
type MessagesBlock struct {
	Type     string          `json:"type"` // "text" or "tool_use"
	Text     string          `json:"text,omitempty"`
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Thinking string          `json:"thinking,omitempty"`
}

// MarshalJSON writes the block with the members of its type.
func (b MessagesBlock) MarshalJSON() ([]byte, error) {
	if b.Type == BlockToolUse {
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		return json.Marshal(struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, input})
	}
	if b.Type == BlockThinking {
		return json.Marshal(struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, ""})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{b.Type, b.Text})
}

// Types of content blocks.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
	BlockThinking   = "thinking"
)

// MessagesUsage counts a message's tokens. As Anthropic counts them,
// InputTokens are the prompt tokens not read from the cache: the whole
// prompt is InputTokens + CacheReadInputTokens (the router never writes
// a cache on request, so CacheCreationInputTokens is 0).
type MessagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// NewMessagesUsage is the usage of a completion's, split as Anthropic
// counts a prompt's tokens.
func NewMessagesUsage(u Usage) MessagesUsage {
	c := u.Cached()
	return MessagesUsage{InputTokens: u.PromptTokens - c, CacheReadInputTokens: c, OutputTokens: u.CompletionTokens}
}

// Stop reasons of a message.
const (
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopToolUse   = "tool_use"
)

// MessagesStopReason is the stop reason of a choice that finished with
// reason: max_tokens when cut by length, tool_use when it ended in tool
// calls, else end_turn. MLC's engines do not say which stop string ended
// a text, so a text ended by one of stop_sequences is an end_turn too,
// without its stop_sequence.
func MessagesStopReason(finish string) string {
	switch finish {
	case FinishLength:
		return StopMaxTokens
	case FinishToolCalls:
		return StopToolUse
	}
	return StopEndTurn
}

// NewMessagesResponse returns an answer in progress (no stop reason yet)
// or done.
func NewMessagesResponse(id, model string, content []MessagesBlock, stopReason *string, usage MessagesUsage) MessagesResponse {
	if content == nil {
		content = []MessagesBlock{}
	}
	return MessagesResponse{ID: id, Type: "message", Role: RoleAssistant, Content: content, Model: model, StopReason: stopReason, Usage: usage}
}

// The events of a streamed message, in the order they come: each is sent
// as "event: <type>" with its JSON as data.
type (
	MessageStartEvent struct {
		Type    string           `json:"type"` // message_start
		Message MessagesResponse `json:"message"`
	}
	ContentBlockStartEvent struct {
		Type         string        `json:"type"` // content_block_start
		Index        int           `json:"index"`
		ContentBlock MessagesBlock `json:"content_block"`
	}
	ContentBlockDeltaEvent struct {
		Type  string `json:"type"` // content_block_delta
		Index int    `json:"index"`
		Delta any    `json:"delta"` // TextDelta or InputJSONDelta
	}
	// TextDelta is the delta of a text block.
	TextDelta struct {
		Type string `json:"type"` // text_delta
		Text string `json:"text"`
	}
	// ThinkingDelta is a piece of a thinking block.
	ThinkingDelta struct {
		Type     string `json:"type"` // thinking_delta
		Thinking string `json:"thinking"`
	}
	// InputJSONDelta is a piece of a tool_use block's input, as JSON
	// text: the pieces joined are the input.
	InputJSONDelta struct {
		Type        string `json:"type"` // input_json_delta
		PartialJSON string `json:"partial_json"`
	}
	ContentBlockStopEvent struct {
		Type  string `json:"type"` // content_block_stop
		Index int    `json:"index"`
	}
	MessageDeltaEvent struct {
		Type  string        `json:"type"` // message_delta
		Delta MessageDelta  `json:"delta"`
		Usage MessagesUsage `json:"usage"`
	}
	// MessageDelta is how the message ended.
	MessageDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	// MessagesEvent is an event that has only its type: ping and
	// message_stop.
	MessagesEvent struct {
		Type string `json:"type"`
	}
)

// Event names of a streamed message.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventPing              = "ping"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventError             = "error"
)

// Error types of Anthropic's error bodies.
const (
	AnthropicInvalidRequest  = "invalid_request_error"
	AnthropicAuthentication  = "authentication_error"
	AnthropicPermission      = "permission_error"
	AnthropicNotFound        = "not_found_error"
	AnthropicRequestTooLarge = "request_too_large"
	AnthropicRateLimit       = "rate_limit_error"
	AnthropicAPIError        = "api_error"
	AnthropicOverloaded      = "overloaded_error"
	AnthropicTimeout         = "timeout_error"
)

// AnthropicErrorBody is an error in Anthropic's shape:
// {"type": "error", "error": {"type": ..., "message": ...}}; it is the
// data of a stream's error event too.
type AnthropicErrorBody struct {
	Type  string         `json:"type"` // "error"
	Error AnthropicError `json:"error"`
}

// AnthropicError is the error of an AnthropicErrorBody.
type AnthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Anthropic returns e in Anthropic's shape: the type that goes with its
// status (a 503 of the router is Anthropic's overloaded_error), and the
// parameter, which Anthropic's errors name in the message, in front of
// the message when the message does not start with it.
func (e *Error) Anthropic() AnthropicErrorBody {
	msg := e.Message
	if e.Param != nil && *e.Param != "" && !strings.HasPrefix(msg, *e.Param) {
		msg = *e.Param + ": " + msg
	}
	return AnthropicErrorBody{Type: "error", Error: AnthropicError{Type: anthropicErrorType(e.Status), Message: msg}}
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return AnthropicInvalidRequest
	case http.StatusUnauthorized:
		return AnthropicAuthentication
	case http.StatusForbidden:
		return AnthropicPermission
	case http.StatusNotFound:
		return AnthropicNotFound
	case http.StatusRequestEntityTooLarge:
		return AnthropicRequestTooLarge
	case http.StatusTooManyRequests:
		return AnthropicRateLimit
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return AnthropicTimeout
	case http.StatusServiceUnavailable, 529:
		return AnthropicOverloaded
	}
	if status >= 400 && status < 500 {
		return AnthropicInvalidRequest
	}
	return AnthropicAPIError
}

// WriteAnthropic answers e on w in Anthropic's shape, with its status and
// headers (Retry-After).
func (e *Error) WriteAnthropic(w http.ResponseWriter) {
	b, _ := json.Marshal(e.Anthropic())
	e.WriteBody(w, b)
}

// WriteFor answers e on w in the shape of the API at path: Anthropic's
// on the Messages API's paths, else OpenAI's.
func (e *Error) WriteFor(w http.ResponseWriter, path string) {
	if strings.HasPrefix(path, PathMessages) {
		e.WriteAnthropic(w)
		return
	}
	e.Write(w)
}
