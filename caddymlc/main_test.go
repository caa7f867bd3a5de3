package caddymlc

import (
	"os"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// TestMain lets the test binary double as the engine program: the fleet
// runs built-in engines as `<this binary> mlc-engine ...`, as it runs them
// from the caddy binary in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == engine.BuiltinSubcommand {
		os.Exit(builtin.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}
