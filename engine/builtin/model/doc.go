// Package model is the built-in engine's language model: a small
// Llama-style decoder (RMSNorm, rotary position embeddings, multi-head
// attention over a slot-addressed KV cache, SwiGLU feed-forward, an
// untied output projection) whose weights come from a PRNG seeded by the model name, so
// every process that loads the same name holds the same model.
//
// The model runs one token at a time: [Model.Forward] computes the keys and
// values of one position, writes them to its KV slot, and attends over the
// slots of positions 0..pos in order. The float operations that produce a
// token's keys, values and logits are therefore the same whether a prompt is
// prefilled in one pass, in chunks, across engines or after a preemption:
// determinism is what makes the engine's outputs an exact oracle.
package model
