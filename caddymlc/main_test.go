package caddymlc

import (
	"os"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// TestMain lets the test binary double as the engine program: the fleet
// runs built-in engines as `<this binary> mlc-engine ...`, as it runs them
// from the caddy binary in production. As `<this binary> run ...` it is a
// Caddy of its own, for tests that need a second Caddy process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == engine.BuiltinSubcommand {
		os.Exit(builtin.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "run" {
		caddycmd.Main()
		return
	}
	os.Exit(m.Run())
}
