// Package protocol holds the wire types of the APIs that caddy-mlc speaks:
// the OpenAI-compatible completion API served to clients, MLC-LLM's
// microserving API spoken to engines, server-sent events, and OpenAI-style
// error bodies.
//
// Two more APIs are served on the chat path: Anthropic's Messages API
// (messages.go, messagesanswer.go: its errors in Anthropic's shape too)
// and OpenAI's Responses API (responses.go, responseanswer.go). Each
// request converts to the ChatCompletionRequest of the same conversation
// (Chat), so that its text is chat's.
//
// The types follow MLC-LLM's python/mlc_llm/protocol definitions field by
// field (see shared/docs/microserving-protocol.md). Fields a type does not
// model are kept in its Extra map and written back on encode, so a request
// forwarded to an engine loses nothing the client sent.
//
// Requests are checked by their Validate methods as MLC-LLM's models and
// validators check them, within OpenAI's bounds (MaxN, MaxStopStrings,
// MaxCompletionLogprobs...), each failure a 400 that names the parameter
// and carries OpenAI's code. Answers are shaped so that MLC's models
// accept them; internal/testkit/mlcschema checks both sides in tests.
//
// Embeddings (POST /v1/embeddings) come in three pieces a server puts
// together, the built-in engine's and the router's alike:
// DecodeEmbeddingRequest checks what needs no model; CheckTokens and
// CheckDimensions what needs the model's input bound and vector size;
// NewEmbeddingResponse writes the vectors, truncated to dimensions and
// renormalised as MLC's server does (TruncateEmbedding), as floats or as
// base64 of little-endian float32 (EncodeEmbeddingBase64).
//
// The package has no Caddy imports: the built-in engine, the router and the
// tests all share it.
package protocol
