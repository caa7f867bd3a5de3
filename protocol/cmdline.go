package protocol

// Values of the --prefix-cache-mode flag of `mlc_llm serve` (and of the
// built-in engine, which takes the same command line).
const (
	PrefixCacheRadix   = "radix"
	PrefixCacheDisable = "disable"
)
