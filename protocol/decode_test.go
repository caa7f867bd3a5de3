package protocol

import "io"

// DecodeCompletionRequest reads, decodes and validates a client's
// completion request body of at most limit bytes, as the router does
// (ReadBody, DecodeJSON, Validate). Only tests need it in one call.
func DecodeCompletionRequest(r io.Reader, limit int64) (*CompletionRequest, *Error) {
	return decodeCompletionRequest(r, limit, (*CompletionRequest).Validate)
}
