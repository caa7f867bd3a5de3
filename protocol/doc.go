// Package protocol holds the wire types of the APIs that caddy-mlc speaks:
// the OpenAI-compatible completion API served to clients, MLC-LLM's
// microserving API spoken to engines, server-sent events, and OpenAI-style
// error bodies.
//
// The types follow MLC-LLM's python/mlc_llm/protocol definitions field by
// field (see shared/docs/microserving-protocol.md). Fields a type does not
// model are kept in its Extra map and written back on encode, so a request
// forwarded to an engine loses nothing the client sent.
//
// The package has no Caddy imports: the built-in engine, the router and the
// tests all share it.
package protocol
