// Package mlcschema checks JSON against the constraints that MLC-LLM's
// pydantic protocol models impose (python/mlc_llm/protocol/
// openai_api_protocol.py, debug_protocol.py and error_protocol.py in
// mlc-ai/mlc-llm), so that tests can tell whether MLC-LLM, or a client
// written against the same models, would accept what caddy-mlc sends:
// every response the router's tests see, and the requests it forwards.
//
// The models are restated here from reading the Python, field by field:
// which fields are required, which may be null (Optional), their JSON
// types, their Literal values, and the validators that run after the
// fields (penalty and logit_bias ranges, logprobs, stream options, debug
// config, check_message_validity, check_function_call_usage and the
// unsupported best_of). A check reports every violation it finds, each
// with the path of the offending value (choices[0].delta.role).
//
// Where this package is stricter than pydantic, it is on purpose:
//
//   - Types are checked as pydantic's strict mode does for JSON: "5" is not
//     an int, 5.0 is not an int, 1 is not a bool. OpenAI rejects these too,
//     and caddy-mlc never sends them. Dict keys stay strings in JSON, so an
//     int key is a string of decimal digits with an optional sign.
//   - Where MLC declares a plain str with a default that OpenAI fixes
//     (object "text_completion", "list", "model"), the value is checked.
//   - CheckClientCompletionResponse and CheckClientCompletionChunk reject
//     finish_reason "preempt", which MLC's model allows (an engine answers
//     it) but the router must never show a client: it resumes the request.
//
// CheckErrorBody checks the OpenAI error body the router answers;
// CheckMLCError checks MLC's own ErrorResponse, which mlc_llm serve
// answers (JSON-encoded once more, as a string; decode that first).
//
// The package imports nothing of caddy-mlc, so that any package's tests
// can use it, protocol's included.
package mlcschema
