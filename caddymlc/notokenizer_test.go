package caddymlc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With a model the router cannot read a tokenizer from (an engine that
// loads it its own way), token-id prompts are served and everything that
// needs the tokenizer gets a clear 400.
func TestWithoutTokenizerTokenIDsOnly(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CADDY_MLC_TEST_BIN", exe)
	script, _ := filepath.Abs("testdata/tiny-engine.sh")
	s := startSiteModel(t, "HF://example/not-a-directory", 2, "\t\t\tengine command "+script+"\n")

	ids := []int{5, 17, 42, 99, 7}
	want := reference(s, s.engines[1], greedy(ids, 10))
	got, status, raw := s.complete(s.base, greedy(ids, 10))
	if status != 200 || got.Choices[0].Text != want {
		t.Fatalf("token ids: %d %s, want %q", status, raw, want)
	}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", greedy("a string prompt", 4)},
		{"/v1/completions", map[string]any{"prompt": ids, "echo": true}},
		{"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
	} {
		raw := post(t, s.base+c.path, c.body, 400)
		if !strings.Contains(string(raw), "tokenizer") {
			t.Fatalf("%s %v: %s", c.path, c.body, raw)
		}
	}
}
