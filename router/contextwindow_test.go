package router

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

func TestContextWindow(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mlc-chat-config.json"), []byte(`{"context_window_size": 8192, "model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind  engine.Kind
		model string
		args  []string
		want  int
	}{
		{engine.KindBuiltin, "tiny", nil, 16384},
		{engine.KindBuiltin, "tiny", []string{"--overrides", "max_num_sequence=8;max_total_seq_length=512"}, 512},
		{engine.KindBuiltin, "tiny", []string{"--overrides", "context_window_size=100;max_total_seq_length=512"}, 100},
		{engine.KindMLC, dir, []string{"--overrides", "max_total_seq_length=2048"}, 2048},
		{engine.KindMLC, dir, nil, 8192},
		{engine.KindMLC, dir, []string{"--overrides=context_window_size=4096"}, 4096},
		{engine.KindMLC, "HF://org/model", nil, 0},
		{engine.KindCommand, dir, nil, 0},
	} {
		if got := ContextWindow(c.kind, c.model, c.args); got != c.want {
			t.Errorf("%s %s %q: %d, want %d", c.kind, c.model, c.args, got, c.want)
		}
	}
}
