// Package builtin is caddy-mlc's built-in CPU engine: a process that speaks
// exactly the `mlc_llm serve` HTTP API and command line (OpenAI completions,
// MLC's microserving endpoints for prefill/decode disaggregation, engine
// metrics) on top of a small deterministic model (package model), a paged KV
// cache with a radix prefix cache (package kvcache), and a
// continuous-batching scheduler.
//
// The engine is an exact oracle: the same prompt gives the same token ids
// whether it is prefilled in one pass or in chunks, across two engine
// processes at any split point, or resumed after a preemption.
//
// Sampling: temperature 0 is greedy (the lowest id wins a tie); an absent
// temperature means 1.0, as in MLC. With a seed, sampling is reproducible;
// without one it is random.
package builtin
