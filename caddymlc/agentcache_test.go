package caddymlc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
)

// The agent clients at their defaults, as a new user runs them: Claude
// Code with its own system prompt and every tool it offers, Codex with
// its instructions and tools, on a model with a real tokenizer (Qwen3's,
// 151k tokens, its Jinja chat template) and the main job's shape (two
// built-in engines in disagg) with the defaults (the prefix cache on,
// sessions). Their prompts are long (some 19,000 tokens for Claude Code):
// the first turn computes it, and the turn after the tool's result finds
// it in the decode engine's cache, which the client reports as cache
// reads. Slow (a minute or two each on a loaded CPU): the other agent
// tests shorten the prompts.

// startQwen3Site starts the main job's shape over Qwen3's tokenizer
// directory, model qwen3, answering from replies; the engines' KV cache
// holds a client's whole prompt.
func startQwen3Site(t *testing.T, replies []cannedReply) *site {
	t.Helper()
	dir := npmref.ModelDir(t, "qwen3")
	file := filepath.Join(t.TempDir(), "replies.json")
	if err := os.WriteFile(file, []byte(mustJSON(replies)), 0o644); err != nil {
		t.Fatal(err)
	}
	return startSiteModel(t, "qwen3", 2, fmt.Sprintf("\t\t\tpath %s\n\t\t\tmode disagg\n\t\t\tengine_args --replies %q --overrides max_total_seq_length=65536\n", dir, file))
}

// cachedSession checks a two-turn session's usages as a client summed
// them: the second turn found nearly all of the first's prompt cached,
// so the cache reads are at least 45% of the prompt tokens of both; and
// the router read the client's session (home counts the turns the
// router sent back to their session's engines before the client ran).
func cachedSession(t *testing.T, client string, input, cached, home float64) {
	t.Helper()
	t.Logf("%s: %.0f prompt tokens, %.0f of them cached", client, input, cached)
	if cached < 0.45*input {
		t.Errorf("%s reports %.0f cache reads of %.0f prompt tokens over two turns, want at least 45%%", client, cached, input)
	}
	if n := sessionsHome(t) - home; n < 1 {
		t.Errorf("%s: %v turns went back to their session's engine, want the second turn's (the session not read)", client, n)
	}
}

// sessionsHome is how many of qwen3's turns (per role) the router sent
// back to the engine of their session's last.
func sessionsHome(t *testing.T) float64 {
	return metricValue(t, "caddy_mlc_session_routes_total", "model", "qwen3", "role", "decode", "outcome", "home")
}

func TestAgentClaudeCodeDefaultsQwen3(t *testing.T) {
	work, secret := agentWorkdir(t)
	s := startQwen3Site(t, agentReplies(toolCall("Read", map[string]any{"file_path": secret})))
	home := sessionsHome(t)
	cmd := exec.Command(npmref.AgentBin(t, "claude"), "-p", agentTask, "--allowedTools", "Read", "--permission-mode", "dontAsk",
		"--max-turns", "4", "--output-format", "stream-json", "--verbose")
	cmd.Dir = work
	cmd.Env = agentEnv(t, "ANTHROPIC_BASE_URL="+s.base, "ANTHROPIC_API_KEY=test", "ANTHROPIC_MODEL=qwen3", "ANTHROPIC_SMALL_FAST_MODEL=qwen3",
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1")
	out := runAgent(t, cmd)

	var result map[string]any
	for _, l := range jsonLines(out) {
		if l["type"] == "result" {
			result = l
		}
	}
	if result == nil || result["is_error"] != false || !strings.Contains(fmt.Sprint(result["result"]), agentAnswer) {
		t.Fatalf("Claude Code's result %v, want %q; it printed:\n%s", result, agentAnswer, tail(out))
	}
	usage, _ := result["usage"].(map[string]any)
	num := func(k string) float64 { f, _ := usage[k].(float64); return f }
	cachedSession(t, "Claude Code", num("input_tokens")+num("cache_read_input_tokens"), num("cache_read_input_tokens"), home)
}

func TestAgentCodexDefaultsQwen3(t *testing.T) {
	work, secret := agentWorkdir(t)
	s := startQwen3Site(t, agentReplies(toolCall("exec_command", map[string]any{"cmd": "cat " + secret})))
	home := sessionsHome(t)
	cmd := exec.Command(npmref.AgentBin(t, "codex"), "exec", "--skip-git-repo-check", "-s", "read-only", "--json",
		"-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
		"-c", "model_providers.fleet.name=fleet", "-c", "model_providers.fleet.base_url="+s.base+"/v1",
		"-c", "model_providers.fleet.wire_api=responses", "-c", "model_providers.fleet.env_key=FLEET_API_KEY",
		"-c", "model_provider=fleet", "-c", "model=qwen3", agentTask)
	cmd.Dir = work
	cmd.Env = agentEnv(t, "CODEX_HOME="+t.TempDir(), "FLEET_API_KEY=test")
	out := runAgent(t, cmd)

	var said []string
	var input, cached float64
	for _, l := range jsonLines(out) {
		if item, _ := l["item"].(map[string]any); l["type"] == "item.completed" && item["type"] == "agent_message" {
			said = append(said, fmt.Sprint(item["text"]))
		}
		if u, _ := l["usage"].(map[string]any); l["type"] == "turn.completed" {
			in, _ := u["input_tokens"].(float64)
			c, _ := u["cached_input_tokens"].(float64)
			input, cached = input+in, cached+c
		}
	}
	if !strings.Contains(strings.Join(said, "\n"), agentAnswer) {
		t.Fatalf("Codex said %q, want %q; it printed:\n%s", said, agentAnswer, tail(out))
	}
	cachedSession(t, "Codex", input, cached, home)
}
