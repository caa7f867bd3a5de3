package engine

import (
	"fmt"
	"io"
	"os"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// KindBuiltin runs caddy-mlc's own CPU engine: Program (normally the
// caddy binary itself) with the subcommand "mlc-engine".
const KindBuiltin Kind = "builtin"

// BuiltinSubcommand is the subcommand of the caddy binary that runs the
// builtin engine.
const BuiltinSubcommand = "mlc-engine"

func init() { RegisterKind(KindBuiltin, builtinDriver{}) }

// builtinDriver runs the built-in engine:
//
//	<program> mlc-engine <serve args with --device cpu>
//
// without --overrides: gpu_memory_utilization means nothing on a CPU.
type builtinDriver struct{}

// executable finds the binary that runs the builtin engine.
var executable = os.Executable

// Configure makes the binary running the config, which serves the builtin
// engine as its mlc-engine subcommand, the program.
func (builtinDriver) Configure(s *Spec, command []string) error {
	if len(command) > 0 {
		return fmt.Errorf("engine %s takes no command", KindBuiltin)
	}
	exe, err := executable()
	if err != nil {
		return fmt.Errorf("finding this binary for the built-in engine: %w", err)
	}
	s.Program = exe
	return nil
}

func (builtinDriver) Normalize(*Spec) {}

func (builtinDriver) Validate(s Spec) error { return s.needsProgram() }

func (builtinDriver) Command(s Spec, i int) (string, []string) {
	return s.Program, append([]string{BuiltinSubcommand}, s.serveArgs(i, "cpu", false)...)
}

// Env gives the engine its peers: the builtin engine reaches the others
// of its NVSHMEM world through them.
func (builtinDriver) Env(s Spec, _ int) ([]string, error) { return s.peersEnv() }

func (builtinDriver) NVSHMEMPython(Spec) string { return DefaultPython }

// ContextWindow is the engine's own sequence limit for its command line
// (context_window_size within max_total_seq_length).
func (builtinDriver) ContextWindow(model string, engineArgs []string) int {
	n, err := builtin.SequenceLimit(append([]string{model}, engineArgs...))
	if err != nil {
		return 0
	}
	return n
}

// Batch is the engine's max_num_sequence for its command line: the
// fleet's --mode server (see Spec.Command), then engineArgs.
func (builtinDriver) Batch(model string, engineArgs []string) int {
	o, err := builtin.ParseArgs(append([]string{model, "--mode", "server"}, engineArgs...), io.Discard)
	if err != nil {
		return 0
	}
	return o.Overrides.MaxNumSequence
}

// EmbeddingBounds are the built-in embedding model's.
func (builtinDriver) EmbeddingBounds(model, lib string) (dim, maxTokens int) {
	// The command line needs a model of its own, which the embedding
	// model's bounds do not depend on.
	args := []string{builtin.TinyModel, "--embedding-model", model}
	if lib != "" {
		args = append(args, "--embedding-model-lib", lib)
	}
	info, err := builtin.EmbeddingModelInfo(args)
	if err != nil || info == nil {
		return 0, 0
	}
	return info.Dim, info.MaxTokens
}

// Traits: the builtin engine runs on the CPU, loads the model's
// tokenizer, as the router does (the token ids must match), and serves
// caddy-mlc's extensions.
func (builtinDriver) Traits() Traits {
	return Traits{OnCPU: true, NeedsTokenizer: true, Extensions: ExtensionsAll}
}
