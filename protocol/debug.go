package protocol

// Kinds of disaggregation operation (DisaggConfig.Kind).
const (
	DisaggPrepareReceive  = "prepare_receive"
	DisaggRemoteSend      = "remote_send"
	DisaggStartGeneration = "start_generation"
)

// SpecialQueryEngineMetrics is the special_request that asks an engine for
// its metrics instead of a completion: a completion with no choices whose
// usage.extra holds them. MLC's engines report timings; the built-in
// engine reports its load (running, waiting, blocked: what of waiting its
// last step could not start, prepared, kv_pages_used, kv_pages_cached,
// kv_pages_free, kv_pages_total, ...), MLC's engine_prefill_time_sum
// (ExtraPrefillTime), and, as caddy-mlc's extension, the prompt tokens it
// took from its prefix cache (prefix_reused_tokens, read by tests only)
// and its place in its NVSHMEM world (pe_start, npes, nvshmem_uid_sha256: see
// ExtraPEStart): the router balances on the load and learns a discovered
// engine's recv_rank from pe_start; `caddy mlc-check` checks the world. The
// built-in engine also puts its load (running ... kv_pages_total) in the
// usage.extra of every request's last event, caddy-mlc's extension too: a
// router that finds it there skips the poll of an engine whose requests
// end often, and polls the others (MLC's engines) as before.
const SpecialQueryEngineMetrics = "query_engine_metrics"

// DisaggConfig tells an engine which step of disaggregated serving a
// request is.
type DisaggConfig struct {
	Kind             string `json:"kind,omitempty"`
	KVAppendMetadata string `json:"kv_append_metadata,omitempty"`
	// KVWindowBegin and KVWindowEnd bound the KV window; Python-style
	// negative indices count from the end of the prompt.
	KVWindowBegin  *int `json:"kv_window_begin,omitempty"`
	KVWindowEnd    *int `json:"kv_window_end,omitempty"`
	DstGroupOffset *int `json:"dst_group_offset,omitempty"`
}

// DebugConfig is MLC's per-request debug configuration, honoured only by
// engines started with --enable-debug.
type DebugConfig struct {
	IgnoreEOS            bool          `json:"ignore_eos,omitempty"`
	PinnedSystemPrompt   bool          `json:"pinned_system_prompt,omitempty"`
	SpecialRequest       *string       `json:"special_request,omitempty"`
	GrammarExecutionMode string        `json:"grammar_execution_mode,omitempty"`
	DisaggConfig         *DisaggConfig `json:"disagg_config,omitempty"`
}

// Clone returns a deep copy.
func (d *DebugConfig) Clone() *DebugConfig {
	if d == nil {
		return nil
	}
	c := *d
	if d.DisaggConfig != nil {
		dc := *d.DisaggConfig
		c.DisaggConfig = &dc
	}
	return &c
}

// ResolveIndex turns a Python-style index (negative counts from the end)
// into an absolute one for a sequence of length n.
func ResolveIndex(i, n int) int {
	if i < 0 {
		return n + i
	}
	return i
}

// Validate checks the enumerations of MLC's DebugConfig and DisaggConfig
// models; a nil config is valid.
func (d *DebugConfig) Validate() *Error {
	if d == nil {
		return nil
	}
	if sr := d.SpecialRequest; sr != nil && *sr != SpecialQueryEngineMetrics {
		return InvalidRequest("debug_config.special_request", "debug_config.special_request must be %q, got %q", SpecialQueryEngineMetrics, *sr).WithCode(CodeInvalidValue)
	}
	switch d.GrammarExecutionMode {
	case "", "constraint", "jump_forward":
	default:
		return InvalidRequest("debug_config.grammar_execution_mode", `debug_config.grammar_execution_mode must be "constraint" or "jump_forward", got %q`, d.GrammarExecutionMode).WithCode(CodeInvalidValue)
	}
	if dc := d.DisaggConfig; dc != nil {
		switch dc.Kind {
		case "", DisaggPrepareReceive, DisaggRemoteSend, DisaggStartGeneration:
		default:
			return InvalidRequest("debug_config.disagg_config.kind", "debug_config.disagg_config.kind must be %q, %q or %q, got %q",
				DisaggPrepareReceive, DisaggRemoteSend, DisaggStartGeneration, dc.Kind).WithCode(CodeInvalidValue)
		}
	}
	return nil
}
