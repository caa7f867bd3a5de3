// Package toolcall reads tool calls out of the text a model generates, as
// vLLM's --tool-call-parser options do, both streamed and whole. The router
// feeds a Parser each choice's text in pieces as the engine sends it, and
// forwards the events that come out as content or as tool calls.
//
// The formats, one example each:
//
//	hermes       Let me look.<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>
//	llama3_json  <|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}
//	mistral      [TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]
//	             (or the newer [TOOL_CALLS]f[ARGS]{"a": 1})
//	pythonic     [f(a=1, b='x'), g()]
//	mlc          f(a=1, b='x')   (or ["f(a=1)", "g(b=2)"], MLC-LLM's own convention)
//	json         {"name": "f", "arguments": {"a": 1}}   (the router's own: a required
//	             call, written under its grammar; not a tool_parser)
//
// In hermes and mistral, calls sit among content: text around them stays
// content. In llama3_json, pythonic, mlc and json, the whole output is the call
// list or it is all content.
//
// Whole calls only: a Parser returns a call only once it is complete and
// valid, never a call's start, so a client never receives a call that
// turns out not to be one. Until then the parser holds the text that could
// still be a call, and no more than that; text that turns out not to be a
// valid call comes back as text, byte for byte, markup included. The router
// then streams a whole call's arguments to the client in pieces. A call in
// progress is held for at most 1 MiB; past that it is released as text.
package toolcall
