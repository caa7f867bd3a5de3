package npmref

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The agent clients the end-to-end tests drive: Claude Code, the Codex
// CLI (with its prebuilt binary, an optional dependency npm picks per
// platform) and the OpenAI Agents SDK with zod for its tool parameters.
// They are large (the two CLIs ship native binaries), so they are a set
// of their own, in a cache directory of their own: tests that need only
// the reference packages never download them. The Agents SDK needs the
// openai SDK 7 (the reference set pins 4.x for the API tests), so this
// set carries its own openai, the one require("openai") finds next to
// @openai/agents.
const (
	ClaudeCodeVersion   = "2.1.328"
	CodexVersion        = "0.169.0"
	AgentsVersion       = "0.20.0"
	ZodVersion          = "4.6.7"
	AgentsOpenAIVersion = "7.60.0"
)

// AgentPackages are the npm install arguments of the agent set.
var AgentPackages = []string{
	"@anthropic-ai/claude-code@" + ClaudeCodeVersion,
	"@openai/codex@" + CodexVersion,
	"@openai/agents@" + AgentsVersion,
	"zod@" + ZodVersion,
	"openai@" + AgentsOpenAIVersion,
}

var agentSet = &installSet{
	what:     "the agent clients' tests",
	cacheEnv: "CADDY_MLC_NPM_AGENTS_CACHE",
	cacheDir: AgentsCacheDir,
	versions: map[string]string{
		"@anthropic-ai/claude-code": ClaudeCodeVersion,
		"@openai/codex":             CodexVersion,
		"@openai/agents":            AgentsVersion,
		"zod":                       ZodVersion,
		"openai":                    AgentsOpenAIVersion,
	},
	packages: AgentPackages,
}

// AgentsCacheDir is where the agent clients are installed:
// $CADDY_MLC_NPM_AGENTS_CACHE, else CacheDir with "-agents" appended.
func AgentsCacheDir() (string, error) {
	if d := os.Getenv("CADDY_MLC_NPM_AGENTS_CACHE"); d != "" {
		return d, nil
	}
	d, err := CacheDir()
	if err != nil {
		return "", err
	}
	return d + "-agents", nil
}

// AgentsDir installs the agent clients once per test binary and returns
// the directory holding node_modules; it skips or fails tb as Dir does.
func AgentsDir(tb testing.TB) string {
	tb.Helper()
	return agentSet.dir(tb)
}

// AgentBin returns the path of an agent client's executable ("claude",
// "codex").
func AgentBin(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(AgentsDir(tb), "node_modules", ".bin", name)
}

// Run runs cmd with its own process group, killed whole when ctx ends
// (an agent CLI starts children: shells, its native binary), and returns
// its stdout and stderr.
func Run(ctx context.Context, cmd *exec.Cmd) (stdout, stderr []byte, err error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if cmd.Stdin == nil {
		cmd.Stdin = bytes.NewReader(nil)
	}
	inGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			killGroup(cmd)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	killGroup(cmd) // what it left running
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return out.Bytes(), errb.Bytes(), err
}

// AgentScript runs a CommonJS script with node, the agent set (the
// Agents SDK, zod, openai 7) resolvable by require and env added to the
// environment, for at most timeout; it returns what the script printed
// on stdout and stderr.
func AgentScript(tb testing.TB, timeout time.Duration, script string, env ...string) (stdout, stderr []byte, err error) {
	tb.Helper()
	modules := filepath.Join(AgentsDir(tb), "node_modules")
	file := filepath.Join(tb.TempDir(), "agent.cjs")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.Command(Node(tb), file)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+modules), env...)
	return Run(ctx, cmd)
}
