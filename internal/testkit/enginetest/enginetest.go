// Package enginetest lets a test binary be the programs its tests start:
// a fleet starts built-in engines as `<binary> mlc-engine ...`, as it
// starts them from the caddy binary in production, and a test that needs a
// second Caddy process runs `<binary> run ...`.
package enginetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
	// The built-in engine is a kind the fleets of the tests run.
	_ "github.com/caddy-mlc/caddy-mlc/engine/builtin/builtinkind"
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
	os.Exit(run(m))
}

// run runs the tests with Caddy's data and config directories of their
// own (the response store's file, certificates), removed after them: a
// test touches only what it made, not the user's Caddy storage.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "caddy-mlc-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	return m.Run()
}

// Children returns the pids of this process's living child processes (the
// engines and Caddys its tests started), from /proc; a test that checks
// none is left behind compares them before and after. It skips the test
// where there is no /proc.
func Children(tb testing.TB) map[int]bool {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Skip("no /proc")
	}
	me := strconv.Itoa(os.Getpid())
	out := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == me && fields[0] != "Z" {
			out[pid] = true
		}
	}
	return out
}
