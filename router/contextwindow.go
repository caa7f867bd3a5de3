package router

import (
	"strconv"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// ContextWindow returns the most tokens one sequence (prompt and
// generation) may hold on the fleet's engines, or 0 when the router
// cannot know it. The router refuses what does not fit with OpenAI's
// context_length_exceeded before any engine is asked: MLC's engines do not
// refuse a max_tokens beyond their context, they stop generating at its
// end, and a request must get the same answer whichever engine serves it.
//
//   - builtin: the engine's own sequence limit for its command line
//     (context_window_size within max_total_seq_length).
//   - mlc: the model's mlc-chat-config.json context_window_size, or
//     --overrides context_window_size, within --overrides
//     max_total_seq_length; unknown for a model the router cannot read
//     (an HF:// name) or a sliding-window model (-1).
//   - command: unknown.
func ContextWindow(kind engine.Kind, model string, engineArgs []string) int {
	switch kind {
	case engine.KindBuiltin:
		n, err := builtin.SequenceLimit(append([]string{model}, engineArgs...))
		if err != nil {
			return 0
		}
		return n
	case engine.KindMLC:
		n, ok := overrideInt(engineArgs, "context_window_size")
		if !ok {
			n, _ = builtin.ChatConfigContextWindow(model) // unreadable: unknown
		}
		if total, ok := overrideInt(engineArgs, "max_total_seq_length"); ok && n > 0 && total > 0 {
			n = min(n, total)
		}
		return max(n, 0)
	}
	return 0
}

// overrideInt finds key in the "k=v;k=v" value of an --overrides flag of
// args (the last such flag wins, as flag parsers read it).
func overrideInt(args []string, key string) (int, bool) {
	n, found := 0, false
	for i, a := range args {
		var val string
		switch {
		case a == "--overrides" && i+1 < len(args):
			val = args[i+1]
		case strings.HasPrefix(a, "--overrides="):
			val = strings.TrimPrefix(a, "--overrides=")
		default:
			continue
		}
		for kv := range strings.SplitSeq(val, ";") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) != key {
				continue
			}
			if x, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				n, found = x, true
			}
		}
	}
	return n, found
}
