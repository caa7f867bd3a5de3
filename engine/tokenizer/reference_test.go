package tokenizer

import (
	"github.com/caddy-mlc/caddy-mlc/internal/npmref"

	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The conformance tests compare this package with references no one
// here wrote, installed by package npmref.

// modelDir returns the directory with tokenizer.json and
// tokenizer_config.json of a reference package ("llama3" or "qwen3").
func modelDir(tb testing.TB, model string) string { return npmref.ModelDir(tb, model) }

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
	dir := npmref.Dir(tb)
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
	dir := npmref.Dir(tb)
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
