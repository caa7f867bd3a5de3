package mlcschema

import (
	"encoding/json"
	"fmt"
)

// CheckCompletionRequest checks a /v1/completions body against
// CompletionRequest, its validators, and the unsupported best_of.
func CheckCompletionRequest(raw []byte) error { return check(raw, completionRequest) }

// CheckChatRequest checks a /v1/chat/completions body against
// ChatCompletionRequest, its validators, check_message_validity and
// check_function_call_usage.
func CheckChatRequest(raw []byte) error { return check(raw, chatCompletionRequest) }

// CheckCompletionResponse checks a whole completion against
// CompletionResponse.
func CheckCompletionResponse(raw []byte) error { return check(raw, completionResponse) }

// CheckCompletionChunk checks one event of a completion stream (the data
// of an SSE event, not [DONE]). MLC streams CompletionResponse too.
func CheckCompletionChunk(raw []byte) error { return check(raw, completionResponse) }

// CheckClientCompletionResponse is CheckCompletionResponse for an answer
// to a client of the router, which never ends a choice with "preempt".
func CheckClientCompletionResponse(raw []byte) error {
	return withoutPreempt(raw, CheckCompletionResponse(raw))
}

// CheckClientCompletionChunk is CheckCompletionChunk for a chunk sent to a
// client of the router, which never ends a choice with "preempt".
func CheckClientCompletionChunk(raw []byte) error {
	return withoutPreempt(raw, CheckCompletionChunk(raw))
}

// CheckChatResponse checks a whole chat completion against
// ChatCompletionResponse.
func CheckChatResponse(raw []byte) error { return check(raw, chatCompletionResponse) }

// CheckChatChunk checks one event of a chat completion stream against
// ChatCompletionStreamResponse: among others, every delta has a role.
func CheckChatChunk(raw []byte) error { return check(raw, chatStreamResponse) }

// CheckEmbeddingRequest checks a /v1/embeddings body against
// EmbeddingRequest and its validator.
func CheckEmbeddingRequest(raw []byte) error { return check(raw, embeddingRequest) }

// CheckEmbeddingResponse checks an embeddings answer against
// EmbeddingResponse.
func CheckEmbeddingResponse(raw []byte) error { return check(raw, embeddingResponse) }

// CheckModelList checks the body of GET /v1/models: a ListResponse of
// ModelResponse.
func CheckModelList(raw []byte) error { return check(raw, modelList) }

// CheckErrorBody checks an OpenAI error body, {"error": {"message",
// "type", "param", "code"}}, which the router answers.
func CheckErrorBody(raw []byte) error { return check(raw, openAIError) }

// CheckMLCError checks MLC's ErrorResponse, {"object": "error", "message":
// ..., "code": <status>}.
func CheckMLCError(raw []byte) error { return check(raw, mlcError) }

// withoutPreempt adds to err (the result of the model's check of raw) a
// violation for each choice that finished with "preempt".
func withoutPreempt(raw []byte, err error) error {
	var body struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(raw, &body) != nil {
		return err // the model's check already says why
	}
	var found []Violation
	for i, ch := range body.Choices {
		if ch.FinishReason != nil && *ch.FinishReason == "preempt" {
			found = append(found, Violation{Path: fmt.Sprintf("choices[%d].finish_reason", i),
				Message: `"preempt" must not reach a client: the router resumes a preempted request`})
		}
	}
	if len(found) == 0 {
		return err
	}
	if e, ok := err.(*Error); ok {
		e.Violations = append(e.Violations, found...)
		return e
	}
	return &Error{Model: completionResponse.name, Violations: found}
}
