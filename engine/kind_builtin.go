package engine

import (
	"fmt"
	"os"
)

// KindBuiltin runs caddy-mlc's own CPU engine: Program (normally the
// caddy binary itself) with the subcommand "mlc-engine".
const KindBuiltin Kind = "builtin"

// BuiltinSubcommand is the subcommand of the caddy binary that runs the
// builtin engine.
const BuiltinSubcommand = "mlc-engine"

// BuiltinLimits are what only the built-in engine knows of its own
// command line (`<model> [flags]`, as the fleet starts it): package
// builtin answers them (builtin.Limits) without importing this package.
type BuiltinLimits interface {
	// SequenceLimit is the most tokens one sequence holds; 0: unknown.
	SequenceLimit(args []string) int
	// Batch is its max_num_sequence; 0: unknown.
	Batch(args []string) int
	// Embedding is the vector size of the embedding model the engine
	// loads for --embedding-model model (and --embedding-model-lib lib),
	// and the most tokens of an input; 0, 0 for none it loads.
	Embedding(model, lib string) (dim, maxTokens int)
}

// BuiltinDriver runs the built-in engine:
//
//	<program> mlc-engine <serve args with --device cpu>
//
// without --overrides: gpu_memory_utilization means nothing on a CPU.
// Package builtin/builtinkind registers it as KindBuiltin with the
// engine's own limits; a binary that links the built-in engine imports
// that package.
type BuiltinDriver struct {
	Limits BuiltinLimits
	// Executable finds the binary that runs the built-in engine (nil:
	// os.Executable, this one).
	Executable func() (string, error)
}

// Configure makes the binary running the config, which serves the builtin
// engine as its mlc-engine subcommand, the program.
func (d BuiltinDriver) Configure(s *Spec, command []string) error {
	if len(command) > 0 {
		return fmt.Errorf("engine %s takes no command", KindBuiltin)
	}
	executable := d.Executable
	if executable == nil {
		executable = os.Executable
	}
	exe, err := executable()
	if err != nil {
		return fmt.Errorf("finding this binary for the built-in engine: %w", err)
	}
	s.Program = exe
	return nil
}

func (BuiltinDriver) Normalize(*Spec) {}

func (BuiltinDriver) Validate(s Spec) error { return s.needsProgram() }

func (BuiltinDriver) Command(s Spec, i int) (string, []string) {
	return s.Program, append([]string{BuiltinSubcommand}, s.serveArgs(i, "cpu", false)...)
}

// Env gives the engine its peers: the builtin engine reaches the others
// of its NVSHMEM world through them.
func (BuiltinDriver) Env(s Spec, _ int) ([]string, error) { return s.peersEnv() }

func (BuiltinDriver) NVSHMEMPython(Spec) string { return DefaultPython }

// ContextWindow is the engine's own sequence limit for its command line
// (context_window_size within max_total_seq_length).
func (d BuiltinDriver) ContextWindow(model string, engineArgs []string) int {
	if d.Limits == nil {
		return 0
	}
	return d.Limits.SequenceLimit(append([]string{model}, engineArgs...))
}

// Batch is the engine's max_num_sequence for its command line: the
// fleet's --mode server (see Spec.Command), then engineArgs.
func (d BuiltinDriver) Batch(model string, engineArgs []string) int {
	if d.Limits == nil {
		return 0
	}
	return d.Limits.Batch(append([]string{model, "--mode", "server"}, engineArgs...))
}

// EmbeddingBounds are the built-in embedding model's.
func (d BuiltinDriver) EmbeddingBounds(model, lib string) (dim, maxTokens int) {
	if d.Limits == nil {
		return 0, 0
	}
	return d.Limits.Embedding(model, lib)
}

// Traits: the builtin engine runs on the CPU, loads the model's
// tokenizer, as the router does (the token ids must match), and serves
// caddy-mlc's extensions.
func (BuiltinDriver) Traits() Traits {
	return Traits{OnCPU: true, NeedsTokenizer: true, Extensions: ExtensionsAll}
}
