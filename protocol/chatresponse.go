package protocol

import "encoding/json"

// The answers of /v1/chat/completions, shaped so that MLC-LLM's
// ChatCompletionResponse and ChatCompletionStreamResponse models accept
// them (internal/testkit/mlcschema checks that in tests).

// SystemFingerprint names the configuration that answered, in every chat
// answer's system_fingerprint. MLC-LLM's models require the field (OpenAI
// clients read it to notice backend changes); the router has one
// configuration as far as clients can tell, so it is a constant.
const SystemFingerprint = "caddy-mlc"

// RoleAssistant is the role of every chat answer.
const RoleAssistant = "assistant"

// Fingerprint is a chat answer's system_fingerprint. The zero Fingerprint
// is written as SystemFingerprint, so that no answer lacks one.
type Fingerprint string

// MarshalJSON writes the fingerprint, SystemFingerprint when unset.
func (f Fingerprint) MarshalJSON() ([]byte, error) {
	if f == "" {
		f = SystemFingerprint
	}
	return json.Marshal(string(f))
}

// AnswerRole is the role of an answer's message; unset, it is written as
// "assistant".
type AnswerRole string

// MarshalJSON writes the role, RoleAssistant when unset.
func (r AnswerRole) MarshalJSON() ([]byte, error) {
	if r == "" {
		r = RoleAssistant
	}
	return json.Marshal(string(r))
}

// ChatMessage is the message of a whole chat completion's choice.
type ChatMessage struct {
	Role      AnswerRole `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ChatDelta is the piece of a message a chat chunk carries. Every delta
// carries the role, not only the first: MLC-LLM's stream model makes each
// delta a ChatCompletionMessage, whose role is required.
type ChatDelta struct {
	Role      AnswerRole      `json:"role"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ChatChoice is one answer of a whole chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
}

// ChatChunkChoice is one answer's piece in a chat chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
}

// ChatCompletionResponse is a whole chat completion.
type ChatCompletionResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint Fingerprint  `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
}

// ChatCompletionChunk is one event of a streamed chat completion.
type ChatCompletionChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint Fingerprint       `json:"system_fingerprint"`
	Choices           []ChatChunkChoice `json:"choices"`
	Usage             *Usage            `json:"usage,omitempty"`
}
