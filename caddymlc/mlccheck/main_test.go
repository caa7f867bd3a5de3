package mlccheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestMain lets the test binary be the built-in engine that --start and
// the tests start.
func TestMain(m *testing.M) { enginetest.Main(m) }

// checkRun is one run of the command in this process.
type checkRun struct {
	status int
	err    error
	out    string
	report jsonReport
}

// runCheck writes caddyfile to a file and runs the command on it with
// --json (and --start when start), parsing what it printed.
func runCheck(t *testing.T, caddyfile string, start bool) checkRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := Options{Config: path, Start: start, Wait: 2 * time.Minute, Timeout: 2 * time.Minute, JSON: true}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := checkRun{}
	run.status, run.err = Run(ctx, opts, &out, zaptest.NewLogger(t))
	run.out = out.String()
	if run.status != ExitError {
		if err := json.Unmarshal(out.Bytes(), &run.report); err != nil {
			t.Fatalf("--json printed no JSON report: %v\n%s", err, run.out)
		}
	}
	t.Logf("exit %d (%v)\n%s", run.status, run.err, run.out)
	return run
}

// results returns the rows of check about engine addr.
func (c checkRun) results(check, addr string) []Result {
	var out []Result
	for _, r := range c.report.Results {
		if r.Check == check && (addr == "" || slices.Contains(r.Engines, addr)) {
			out = append(out, r)
		}
	}
	return out
}

// caddyfile is a site with one mlc_router of the given options and
// endpoints.
func caddyfile(options string, endpoints ...string) string {
	var b strings.Builder
	b.WriteString("{\n\tadmin off\n}\n:0 {\n\tmlc_router {\n")
	for _, line := range strings.Split(strings.TrimSpace(options), "\n") {
		fmt.Fprintf(&b, "\t\t%s\n", strings.TrimSpace(line))
	}
	for _, ep := range endpoints {
		fmt.Fprintf(&b, "\t\tendpoint %s\n", ep)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// handEngine starts a built-in engine by hand, as an operator would for
// an external endpoint, with env on top of the test's; it stops it when
// the test ends.
func handEngine(t *testing.T, model string, port int, env []string, args ...string) {
	t.Helper()
	argv := append([]string{engine.BuiltinSubcommand, model, "--enable-debug", "--mode", "server",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(os.Environ(), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("engine on port %d:\n%s", port, log.String())
		}
	})
}

// worldEnv is the environment of engine i of a world of the given
// engines (one PE each), with its pe_start given.
func worldEnv(ports []int, peStart int) []string {
	peers := make([]protocol.Peer, len(ports))
	for i, p := range ports {
		peers[i] = protocol.Peer{PEStart: i, NPEs: 1, Addr: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	cfg, _ := json.Marshal(protocol.NVSHMEMConfig{UID: []int{9, 8, 7, 6}, NPEs: len(ports), PEStart: peStart})
	pj, _ := json.Marshal(peers)
	return []string{protocol.EnvNVSHMEMConfig + "=" + string(cfg), protocol.EnvBuiltinPeers + "=" + string(pj)}
}
