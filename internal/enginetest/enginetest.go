// Package enginetest lets a test binary be the programs its tests start:
// a fleet starts built-in engines as `<binary> mlc-engine ...`, as it
// starts them from the caddy binary in production, and a test that needs a
// second Caddy process runs `<binary> run ...`.
package enginetest

import (
	"os"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// Main is a TestMain: it runs the built-in engine or Caddy when the test
// binary was started as one, else the tests.
func Main(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case engine.BuiltinSubcommand:
			os.Exit(builtin.Main(os.Args[2:]))
		case "run":
			caddycmd.Main()
			return
		}
	}
	os.Exit(m.Run())
}
