// Package builtin is caddy-mlc's built-in CPU engine: a process that speaks
// exactly the `mlc_llm serve` HTTP API and command line (OpenAI completions,
// MLC's microserving endpoints for prefill/decode disaggregation, engine
// metrics) on top of a small deterministic model (package model), a paged KV
// cache with a radix prefix cache (package kvcache), and a
// continuous-batching scheduler.
//
// The engine is an exact oracle: the same prompt gives the same token ids
// whether it is prefilled in one pass or in chunks, across two engine
// processes at any split point, or resumed after a preemption, because
// every token's keys, values and logits come from the same float
// operations in the same order (see package model).
//
// # Command line
//
// [Main] runs `<model> [flags]`, with `mlc_llm serve`'s flags: --model-lib
// (recorded), --device cpu|cuda:N (recorded; compute is on the CPU),
// --enable-debug, --mode local|interactive|server (default
// max_num_sequence 4, 1 or 64), --prefix-cache-mode radix|disable,
// --overrides "k=v;...", --host, --port. Overrides used:
// max_total_seq_length (KV capacity in tokens, default 16384),
// max_num_sequence, prefill_chunk_size (default 512) and
// prep_recv_timeout_ms (default 60000); other keys are logged and ignored.
// <model> is "tiny" (embedded word-level tokenizer, package tiny) or a
// directory holding tokenizer.json; the weights are seeded by "tiny" or the
// directory's base name.
//
// # Sampling
//
// temperature 0 is greedy (the lowest id wins a tie); an absent temperature
// means 1.0, as in MLC. With a seed, sampling is reproducible (choice i
// uses stream i of the seed); without one it is random. top_p, logit_bias,
// presence and frequency penalties (over generated tokens), stop strings
// (the text ends before the earliest one; text that may still become one is
// held back), EOS (unless debug_config.ignore_eos) and n are honoured.
// A prompt plus max_tokens beyond max_total_seq_length is a 400
// (context_length_exceeded); without max_tokens a generation stops at 256
// tokens or at the end of the context. logprobs k (k up to 20, the bound
// of a chat's top_logprobs, which the router forwards as logprobs) answers,
// per token, its log probability and the k most likely tokens (see
// logprobs.go for the distribution), in MLC's completion shape; in a stream each chunk carries
// those of the tokens whose text it holds. echo, suffix, best_of and
// response_format are accepted and ignored.
//
// # Disaggregation
//
// An engine whose environment holds MLC_NVSHMEM_INIT_CONFIG_JSON_STR is in
// disaggregation mode: a preempted sequence ends with finish_reason
// "preempt" instead of resuming, and it accepts KV transfers. The
// microserving calls of one request are tied by its user field.
// prep_recv waits until free (or evictable cached) pages can hold [matched,
// end) while leaving one page per running sequence. remote_send computes
// [0, end) locally (reusing its own prefix cache), then posts the keys and
// values of [begin, end) to the engine that holds PE recv_rank (found in
// MLC_BUILTIN_PEERS_JSON) at POST /microserving/kv_transfer, whose binary
// body is described at [PathKVTransfer]; it answers {} once that engine
// acknowledged the write. POST /microserving/release {"user"} (caddy-mlc's
// extension, see protocol.PathRelease) frees the user's reservation at
// once, or withdraws its prep_recv still waiting for pages (that call
// answers 499, code prep_recv_released).
//
// # Metrics
//
// GET /metrics serves, through client_golang on a registry of its own,
// mlc_engine_running_requests,
// mlc_engine_waiting_requests, mlc_engine_prepared_requests,
// mlc_engine_kv_pages{state="used|cached|free"}, mlc_engine_kv_pages_total,
// mlc_engine_preemptions_total, mlc_engine_prefill_tokens_total and
// mlc_engine_decode_tokens_total. debug_config.special_request
// "query_engine_metrics" answers the same numbers in usage.extra.
package builtin
