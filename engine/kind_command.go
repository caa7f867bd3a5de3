package engine

import (
	"errors"
	"slices"
)

// KindCommand runs Program with Args, followed by the MLC serve
// arguments.
const KindCommand Kind = "command"

func init() { RegisterKind(KindCommand, commandDriver{}) }

// commandDriver runs a program of the operator's:
//
//	<program> <args...> <serve args with --device cuda:<start>>
//
// It may be anything that serves MLC's API (a wrapper of either other
// kind, say), so the router assumes nothing of it: no context window, no
// tokenizer it needs, no GPUs counted or read.
type commandDriver struct{}

func (commandDriver) Configure(s *Spec, command []string) error {
	if len(command) == 0 || command[0] == "" {
		return errors.New("engine command needs a program")
	}
	s.Program, s.Args = command[0], slices.Clone(command[1:])
	return nil
}

func (commandDriver) Normalize(*Spec) {}

func (commandDriver) Validate(s Spec) error { return s.needsProgram() }

func (commandDriver) Command(s Spec, i int) (string, []string) {
	return s.Program, append(slices.Clone(s.Args), s.serveArgs(i, s.cudaDevice(i), true)...)
}

// Env gives the engine the builtin engine's peers too: a command may wrap
// the builtin engine, and MLC ignores the variable.
func (commandDriver) Env(s Spec, _ int) ([]string, error) { return s.peersEnv() }

func (commandDriver) NVSHMEMPython(Spec) string { return DefaultPython }

func (commandDriver) ContextWindow(string, []string) int { return 0 }

func (commandDriver) Batch(string, []string) int { return 0 }

func (commandDriver) EmbeddingBounds(string, string) (int, int) { return 0, 0 }

func (commandDriver) Traits() Traits { return Traits{} }
