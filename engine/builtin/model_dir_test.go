package builtin

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestDirectoryModel runs an engine on a model directory holding a
// tokenizer.json (a small SentencePiece-style BPE).
func TestDirectoryModel(t *testing.T) {
	dir := filepath.Join("testdata", "spm-mini")
	tok, err := tokenizer.ForModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	hf, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != hf.VocabSize() || !slices.Equal(tok.Encode("hello world"), hf.Encode("hello world")) {
		t.Fatal("LoadTokenizer differs from the directory's tokenizer")
	}
	q := startModel(t, dir, freePort(t), nil, "--model-lib", "/nonexistent/lib.so", "--device", "cuda:0",
		"--overrides", "gpu_memory_utilization=0.8;max_total_seq_length=4096")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Get(q.url(protocol.PathModels))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); !strings.Contains(body, dir) {
		t.Errorf("/v1/models: %s", body)
	}
	resp.Body.Close()
	ids := tok.Encode("hello world")
	a := complete(t, c, q.url(""), protocol.PathCompletions, greedy("hello world", 6))
	b := complete(t, c, q.url(""), protocol.PathCompletions, greedy(ids, 6))
	if a.texts[0] != b.texts[0] || a.usage.CompletionTokens == 0 {
		t.Fatalf("text prompt %q, ids %q", a.texts[0], b.texts[0])
	}
	if status, _ := post(t, c, q.url(protocol.PathCompletions), map[string]any{"prompt": []int{tok.VocabSize()}}); status != http.StatusBadRequest {
		t.Errorf("token outside the vocabulary: %d", status)
	}
}

func TestLoadTokenizerErrors(t *testing.T) {
	for _, model := range []string{"", "no-such-dir", "testdata"} {
		if _, err := tokenizer.ForModel(model); err == nil {
			t.Errorf("tokenizer.ForModel(%q): no error", model)
		}
	}
}
