package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
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
	if configJSON == "" {
		configJSON = "-"
	}
	tmp := tb.TempDir()
	out := filepath.Join(tmp, "out.json")
	res := runNode(tb, "reference.cjs", out,
		filepath.Join(npmref.Dir(tb), "node_modules", "@lenml", "tokenizers"),
		tokenizerJSON, configJSON, writeJSONFile(tb, tmp, "corpus.json", corpus), out, fmt.Sprint(benchRounds))
	if len(res.IDs) != len(corpus) || len(res.IDsSpecial) != len(corpus) || len(res.Decoded) != len(corpus) {
		tb.Fatalf("reference returned %d/%d/%d results for %d strings", len(res.IDs), len(res.IDsSpecial), len(res.Decoded), len(corpus))
	}
	return res
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
	tmp := tb.TempDir()
	out := filepath.Join(tmp, "out.json")
	args := []string{
		filepath.Join(npmref.Dir(tb), "node_modules", "@mlc-ai", "web-tokenizers"),
		tokenizerJSON, writeJSONFile(tb, tmp, "corpus.json", corpus), out, fmt.Sprint(benchRounds),
	}
	if ids != nil {
		args = append(args, writeJSONFile(tb, tmp, "ids.json", ids))
	}
	res := runNode(tb, "reference_mlc.cjs", out, args...)
	if len(res.IDs) != len(corpus) || len(res.Decoded) != len(corpus) || len(res.DecodedIDs) != len(ids) {
		tb.Fatalf("MLC reference returned %d/%d/%d results for %d strings and %d id lists", len(res.IDs), len(res.Decoded), len(res.DecodedIDs), len(corpus), len(ids))
	}
	return res
}

// writeJSONFile writes v as JSON to dir/name and returns the path.
func writeJSONFile(tb testing.TB, dir, name string, v any) string {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// runNode runs node on testdata/<script> with args and decodes the
// result the script wrote to out.
func runNode(tb testing.TB, script, out string, args ...string) *referenceResult {
	tb.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		tb.Fatal(err)
	}
	argv := append([]string{path}, args...)
	cmd := exec.Command(npmref.Node(tb), argv...)
	if output, err := cmd.CombinedOutput(); err != nil {
		if len(output) > 4000 {
			output = output[len(output)-4000:]
		}
		tb.Fatalf("node %v: %v\n...%s", cmd.Args, err, output)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	var res referenceResult
	if err := json.Unmarshal(data, &res); err != nil {
		tb.Fatal(err)
	}
	return &res
}
