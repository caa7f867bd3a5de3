// Package builtin is caddy-mlc's built-in CPU engine: a process that speaks
// exactly the `mlc_llm serve` HTTP API and command line (OpenAI completions
// and chat completions, MLC's microserving endpoints for prefill/decode
// disaggregation, engine metrics) on top of a small deterministic model
// (package model), a paged KV cache with a radix prefix cache (package
// kvcache), and a continuous-batching scheduler (scheduler.go: who runs;
// step.go: the model run on it).
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
// (recorded), --embedding-model and --embedding-model-lib (see
// Embeddings), --device cpu|cuda:N (recorded; compute is on the CPU),
// --enable-debug, --mode local|interactive|server (default
// max_num_sequence 4, 1 or 64), --prefix-cache-mode radix|disable,
// --overrides "k=v;...", --host, --port; and its own --prefill-delay and
// --decode-delay (protocol.Slowness: compute time added per prompt token
// and per decode step, to play a slower GPU; POST /builtin/slowness
// changes them at run time), --timing, --time-scale and --kv-link (see
// Timed engines), and --replies <file> (tests only: scripted answers, see
// Scripted replies). Overrides used:
// max_total_seq_length (KV capacity in tokens, default 16384; a timed
// engine's profile's), context_window_size (see Context),
// max_num_sequence, prefill_chunk_size (default 512; a timed engine's
// 2048) and prep_recv_timeout_ms (default 60000); other keys are
// logged and ignored. <model> is "tiny" (embedded word-level tokenizer,
// package tiny) or a directory holding tokenizer.json; the weights are
// seeded by "tiny" or the directory's base name.
//
// # Timed engines
//
// --timing <profile> (h100-llama3-8b, a100-llama3-8b,
// h100-tp4-llama3-70b, a100-tp4-llama3-70b: package timing) replaces the
// model's arithmetic with the time the profile's GPUs would take, spent
// waiting: a fleet of them stands for a GPU fleet on a few CPU cores,
// each costing the CPU its HTTP, scheduling and bookkeeping (timed.go).
// The scheduler, admission, chunked prefill, KV pages, the prefix
// cache, preemption, the microserving endpoints and the metrics are the
// engine's own; the KV capacity (unless max_total_seq_length says), the
// context (131,072 tokens, unless context_window_size says) and the
// chunk come from the profile. A step is one forward pass over its
// chunks and decoding tokens; its tokens come out when the step's
// modelled time, times --time-scale k, has passed since the last step
// ended (or since the engine was idle): k above 1 runs a fleet slower
// than real time, every modelled duration k times longer, for a client
// that divides its figures by k. A sequence whose prefill ends in a step
// decodes from the next one. remote_send waits for the window's KV bytes
// over --kv-link (nvlink, the default, or rdma) before it posts them.
//
// Tokens come from a generator as cheap as a hash: a position's KV is
// one word, a hash of its token and of the word before it, kept in its
// slot; the token after a position is drawn from its word among the ids
// the model may sample (EOS once in --eos-every tokens on average, 256
// unless told, never under ignore_eos or with --eos-every 0). A cached prefix, a transfer (the words, as one layer of
// width 1) and a preemption move or lose the words as they would keys
// and values, so the text is the same however the prompt was split,
// moved or resumed, and wrong words would show as another text.
// temperature, top_p, seed, logit_bias and the penalties do not change
// it (there are no logits); logprobs and response_format are refused
// (400, code unsupported_by_timed_engine), as is POST /builtin/slowness.
// GET /metrics adds mlc_engine_timed_busy_seconds_total (the modelled
// GPU time), mlc_engine_timed_lag_seconds_total and
// mlc_engine_timed_lag_max_seconds (how late steps ended against their
// modelled end, in modelled seconds: an engine whose CPU cannot keep its
// GPU's pace), mlc_engine_timed_steps_total and mlc_engine_time_scale.
//
// # Scripted replies
//
// The model is pseudo-random: it never chooses to call a tool nor to end.
// To drive agent clients end to end in tests, --replies <file> gives the
// engine text to answer instead. The file is a JSON array of
// {"match": "<substring>", "reply": "<text>"} objects (unknown fields,
// an empty array or an empty reply fail the engine's start, naming the
// file):
//
//	[{"match": "weather", "reply": "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"},
//	 {"match": "<tool_response>", "reply": "It is sunny."},
//	 {"match": "", "reply": "I cannot help with that."}]
//
// At a sequence's first sample, its context (the prompt) is decoded to
// text once. For each entry, the longest start of its reply that ends the
// text is taken as already generated (a request resumed with the text
// delivered so far); the prompt part is the text before the longest such
// tail of any entry. An entry matches when its match occurs in the
// prompt part, an empty match always (a default, behind any other); the
// entry whose match occurs latest there wins, which picks the entry
// whose match is in the last user or tool turn without knowing the
// template; a tie goes to the earlier entry. Without a match, the model
// generates as usual. The rest of the winner's reply is tokenized and
// forced, one token per decode step, in place of the sampled token: the
// forward pass, KV cache, prefix cache, scheduler, preemption and KV
// transfer all run as for sampled tokens; then the sequence ends with
// finish_reason "stop", as at EOS (also under ignore_eos). Sampling
// parameters (temperature, seed, logit_bias, penalties) and the
// restriction to generatable tokens do not apply to a script; max_tokens,
// the context bound and stop strings do. The choice is a function of the
// context, so the text is the same whole, in prefill chunks, on the
// decode engine of a disaggregated run, after an in-engine preemption
// (the sequence keeps its place in the script) and when a router resumes
// the request with the prompt and the delivered text. The answer is
// exact when the tokenizer spells the reply back (Decode(Encode(r)) ==
// r: the tiny and byte-level BPE tokenizers do; the engine logs a
// warning at start for a reply it does not).
//
// # Chat completions
//
// POST /v1/chat/completions renders the conversation with the model's
// chat template (package chat: the tiny one, or the model directory's
// mlc-chat-config.json conv_template, else tokenizer_config.json's
// chat_template) and generates it as a completion with the template's
// stop strings (chat.Completion, the conversion the router makes before
// it sends a completion, so the text is the same either way). It answers
// as MLC's entrypoint does: chat.completion, or chat.completion.chunk
// events whose every delta carries the assistant's role and its text
// (empty with the finish reason), logprobs in the chat shape
// (top_logprobs alternatives), n choices, usage always on a whole answer
// and, streamed, with stream_options.include_usage; a
// query_engine_metrics special request streams one usage chunk. A model
// without a template answers 400 there; so does a conversation the
// template cannot express (param messages) or a longer one than the
// context (see Context). Differences, by choice: system_fingerprint is
// "caddy-mlc" (MLC answers ""), as on the router's answers; tools reach
// only templates that read them (the tiny one renders them Hermes-style,
// see chat.Tiny), and the answer is never parsed into tool_calls; debug_config.disagg_config is refused (disaggregation runs
// on completions).
//
// # Embeddings
//
// --embedding-model (and --embedding-model-lib, recorded) load an
// embedding model next to the chat model, as `mlc_llm serve` does, served
// at POST /v1/embeddings and listed second in GET /v1/models. The model
// is "tiny-embed" ([TinyEmbedModel], the tiny tokenizer) or a directory
// with tokenizer.json: every token id stands for a fixed pseudo-random
// vector of [EmbeddingDim] values drawn from the model's name and the id,
// an input's vector is the mean of its tokens' vectors normalised to unit
// length (float32), the same in every process. As MLC's decoder
// embedding models do, each input gets EOS appended, and usage counts it;
// token-id inputs are decoded to text and encoded again, as MLC's server
// does, so ids embed as the text they spell. The request is checked by
// protocol.DecodeEmbeddingRequest; encoding_format base64 and dimensions
// (truncation, then renormalisation) are MLC's, written by
// protocol.NewEmbeddingResponse. As MLC, the one embedding model answers under any
// model name, and an engine without one answers 400 (param model, code
// model_not_found). Where it differs, by choice: an input longer than 512
// tokens (the directory's context_window_size, if any; EOS included) is a
// 400 context_length_exceeded, and dimensions beyond 64 a 400, where MLC
// would cut the input short and return the whole vector; MLC requires
// --embedding-model-lib, the built-in engine has its own. Answers are
// whole, never streamed.
//
// # Sampling
//
// temperature 0 is greedy (the lowest id wins a tie); an absent temperature
// means 1.0, as in MLC. With a seed, sampling is reproducible (choice i
// uses stream i of the seed); without one it is random. top_p, logit_bias,
// presence and frequency penalties (over generated tokens), stop strings
// (see Stop strings), EOS (unless debug_config.ignore_eos) and n are
// honoured. logprobs k (k up to 20, the bound
// of a chat's top_logprobs, which the router forwards as logprobs) answers,
// per token, its log probability and the k most likely tokens (see
// logprobs.go for the distribution), in MLC's completion shape; in a stream each chunk carries
// those of the tokens whose text it holds. echo, suffix and best_of
// are accepted and ignored. response_format (json_object, with or
// without a schema) constrains decoding to its grammar (see grammar.go
// and package jsongrammar), as MLC's xgrammar does: the answer is JSON of
// the schema and ends with EOS once the value is complete; strings are
// at most 48 bytes, arrays without maxItems and free objects at most 6
// members, free values 4 deep, so that the random weights end a value.
// response_format.resumed_tokens (caddy-mlc's) starts the grammar after
// the prompt's last tokens, the answer so far of a resumed attempt.
//
// # Stop strings
//
// Stop strings apply as MLC's engine applies them (its StopStrHandler,
// ported as stopscan.Handler): to whole tokens, matched against each
// token's entry in MLC's post-processed token table (the bytes it stands
// for, tokenizer.HF.PostProcessedToken). A token that may still start a
// stop string is held back; when one completes, the text ends before the
// token in which it begins, which is dropped with every token after it:
// stop "ar" after " send", " car" gives " send", not " send c". Held
// tokens go out when the generation ends otherwise (length, EOS). The
// stop strings are the request's and the chat template's (MLC adds its
// conversation template's stop_str to completions and chats alike), and
// the template's stop token ids end a generation as EOS does.
// debug_config.ignore_eos turns stop strings off too, as in MLC.
//
// Where it differs, by choice: EOS ends the generation and releases the
// held tokens at once, where MLC first matches the EOS token's own text
// (the same unless that text continues a stop string); and a token's
// logprobs entry goes out with its text, so the entries of held tokens
// wait and those of dropped tokens are dropped, where MLC sends every
// token's entry as it is generated (and no text_offset).
//
// # Scheduling
//
// Each step admits waiting sequences in order as their pages allow,
// computes up to prefill_chunk_size prompt positions, then decodes one
// token of every running sequence (scheduler.go, step.go). Where it
// differs, by choice: MLC's engine takes its waiting queue in order and
// stops at the first prompt that does not fit the step's chunk, so a short
// prompt behind a long one waits for the long one's whole prefill. Here a
// prompt that fits one chunk is short and goes first (the smallest asks
// first), and the long ones get what the short ones leave, at least an
// eighth of the chunk, one at a time in the order they were admitted (see
// prefillShares; vLLM's long_prefill_token_threshold makes the same
// trade). The text is the same either way. A sequence looks up the prefix
// cache when it is admitted and again as it computes its first position,
// so a long prompt admitted beside another with the same head (an agent's
// sessions starting together) takes the head that one computed.
//
// # Context
//
// One sequence holds at most context_window_size tokens (the override,
// else the model directory's mlc-chat-config.json, else no bound), and
// never more than max_total_seq_length, as MLC's max_single_sequence_length
// bounds it (see context.go). A longer prompt is a 400, in MLC's words
// ("Request prompt has N tokens in total, larger than the model input
// length limit L.", param prompt, or messages for a chat, code
// context_length_exceeded), on every call that carries a prompt. A prompt
// that fills the context leaves no room for a token: it is answered at
// once with no text, finish_reason "length" and a usage of zeros, as MLC
// answers it. max_tokens is never held against the context: a generation
// ends with "length" when it reaches max_tokens or fills the context,
// and runs to the context without max_tokens. A prep_recv or remote_send
// of a prompt that fills the context is served (MLC's prep_recv fails on
// the empty answer); its start_generate answers "length" and frees the
// reservation.
//
// Errors are OpenAI's {"error": {message, type, param, code}} with MLC's
// status, not MLC's {"object": "error", message, code} body.
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
// mlc_engine_preemptions_total, mlc_engine_prefill_tokens_total,
// mlc_engine_decode_tokens_total and mlc_engine_prefix_reused_tokens_total
// (the prompt tokens of answered requests taken from the prefix cache). debug_config.special_request
// "query_engine_metrics" answers the same numbers in usage.extra.
package builtin
