package engine

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddy-mlc/caddy-mlc/engine/chat"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// KindMLC runs MLC-LLM: "python3 -m mlc_llm serve".
const KindMLC Kind = "mlc"

func init() { RegisterKind(KindMLC, mlcDriver{}) }

// mlcDriver runs MLC-LLM's engines:
//
//	<python> -m mlc_llm serve <serve args with --device cuda:<start>>
type mlcDriver struct{}

func (mlcDriver) Configure(_ *Spec, command []string) error {
	if len(command) > 0 {
		return fmt.Errorf("engine %s takes no command", KindMLC)
	}
	return nil
}

// Normalize: the program is the Python interpreter (python3 by default),
// and the world's uid comes from NVSHMEM, as MLC's engines need.
func (mlcDriver) Normalize(s *Spec) {
	s.Program = orDefault(s.Program, DefaultPython)
	s.UID = orDefault(s.UID, UIDNVSHMEM)
}

func (mlcDriver) Validate(s Spec) error {
	if s.EmbeddingModel != "" && s.EmbeddingModelLib == "" && s.spawnsAny() {
		// mlc_llm serve refuses to start without it.
		return fmt.Errorf("%w: mlc engines need the embedding model's library (--embedding-model-lib) with an embedding model", ErrInvalidSpec)
	}
	return nil
}

func (mlcDriver) Command(s Spec, i int) (string, []string) {
	return s.Program, append([]string{"-m", "mlc_llm", "serve"}, s.serveArgs(i, s.cudaDevice(i), true)...)
}

// Env: MLC's engines take their NVSHMEM world from its config alone.
func (mlcDriver) Env(Spec, int) ([]string, error) { return nil, nil }

// NVSHMEMPython is the engines' own interpreter, which imports TVM.
func (mlcDriver) NVSHMEMPython(s Spec) string { return s.Program }

// ContextWindow is the model's mlc-chat-config.json context_window_size,
// or --overrides context_window_size, within --overrides
// max_total_seq_length; unknown for a model the router cannot read (an
// HF:// name) or a sliding-window model (-1).
func (mlcDriver) ContextWindow(model string, engineArgs []string) int {
	n, ok := overrideInt(engineArgs, "context_window_size")
	if !ok {
		n, _ = chat.ContextWindow(model) // unreadable: unknown
	}
	if total, ok := overrideInt(engineArgs, "max_total_seq_length"); ok && n > 0 && total > 0 {
		n = min(n, total)
	}
	return max(n, 0)
}

// Batch is --overrides max_num_sequence, or the batch of --mode local (4)
// or interactive (1); unknown in server mode, the fleet's (MLC sizes it
// from GPU memory).
func (mlcDriver) Batch(_ string, engineArgs []string) int {
	if n, ok := overrideInt(engineArgs, "max_num_sequence"); ok {
		return n
	}
	switch flagValue(engineArgs, "--mode") {
	case "local":
		return 4
	case "interactive":
		return 1
	}
	return 0
}

func (mlcDriver) EmbeddingBounds(string, string) (int, int) { return 0, 0 }

// Traits: MLC's engines run on this machine's GPUs, bound a completion's
// logprobs at protocol.MaxCompletionLogprobs, serve none of caddy-mlc's
// extensions, and compile schemas with xgrammar.
func (mlcDriver) Traits() Traits {
	return Traits{UsesGPUs: true, MaxLogprobs: protocol.MaxCompletionLogprobs, Extensions: ExtensionsNone,
		Grammar: protocol.GrammarXGrammar}
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

// flagValue returns the value of flag in args (--flag v or --flag=v), the
// last one given.
func flagValue(args []string, flag string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == flag && i+1 < len(args):
			v = args[i+1]
		case len(a) > len(flag)+1 && strings.HasPrefix(a, flag+"="):
			v = a[len(flag)+1:]
		}
	}
	return v
}
