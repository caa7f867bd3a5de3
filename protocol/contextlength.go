package protocol

// The router's context_length_exceeded answers (OpenAI's): the router
// refuses what the engines' context cannot hold before an engine is asked,
// where MLC's engines (and the built-in engine, which behaves as they do)
// would generate up to the context's end instead of refusing a max_tokens
// that does not fit.

// PromptTooLong is the 400 for a prompt of n tokens where a sequence holds
// at most limit tokens: the prompt alone leaves no room to generate.
func PromptTooLong(n, limit int) *Error {
	return promptTooLong("", n, limit)
}

// PromptTooLongAtLeast is PromptTooLong for a prompt known to have at
// least n tokens: the router refuses a huge prompt from a prefix of it.
func PromptTooLongAtLeast(n, limit int) *Error {
	return promptTooLong("at least ", n, limit)
}

func promptTooLong(bound string, n, limit int) *Error {
	return InvalidRequest("prompt", "prompt has %s%d tokens; this engine holds at most %d (max_total_seq_length)", bound, n, limit-1).
		WithCode(CodeContextLengthExceeded)
}

// MaxTokensTooLong is OpenAI's 400 for a max_tokens m that a prompt of n
// tokens leaves no room for within limit tokens.
func MaxTokensTooLong(n, m, limit int) *Error {
	return InvalidRequest("max_tokens",
		"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the prompt or max_tokens.",
		limit, uint64(n)+uint64(m), n, m).WithCode(CodeContextLengthExceeded)
}

// CheckContext refuses a prompt of n tokens with max_tokens m (nil: none)
// that a context of limit tokens cannot hold; limit 0 is unknown.
func CheckContext(n int, m *int, limit int) *Error {
	switch {
	case limit <= 0:
		return nil
	case n >= limit:
		return PromptTooLong(n, limit)
	case m != nil && *m > limit-n: // not n+m: it may overflow
		return MaxTokensTooLong(n, *m, limit)
	}
	return nil
}
