package caddymlc

// The adapter's side of the built-in engine: the subcommand that runs it,
// and the check of the models it loads.

import (
	"fmt"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
	"github.com/caddy-mlc/caddy-mlc/internal/suggest"

	// The built-in engine is the kind "builtin" of the fleets.
	_ "github.com/caddy-mlc/caddy-mlc/engine/builtin/builtinkind"
)

// engineCommand is `caddy mlc-engine`, the built-in engine.
var engineCommand = caddycmd.Command{
	Name:  engine.BuiltinSubcommand,
	Usage: "<model> [--host H] [--port P] [--enable-debug] [--prefix-cache-mode radix|disable] [--overrides k=v;...]",
	Short: "Runs caddy-mlc's built-in CPU engine (speaks the mlc_llm serve API)",
	Long: `
Runs caddy-mlc's built-in CPU engine: a small Llama-style transformer with a
paged KV cache, radix prefix cache, preemption and KV transfer between
engines, behind the HTTP API and command line of "mlc_llm serve". The
mlc_router directive starts it for every endpoint when "engine builtin" (the
default) is configured; run it by hand for external endpoints.

<model> is "tiny" (embedded) or a directory holding tokenizer.json.`,
	CobraFunc: func(cmd *cobra.Command) {
		// The engine parses its own flags, exactly as mlc_llm serve
		// names them.
		cmd.DisableFlagParsing = true
		cmd.RunE = func(_ *cobra.Command, args []string) error {
			os.Exit(builtin.Main(args))
			return nil
		}
	},
}

// builtinModelErr refuses a model the built-in engine cannot load when
// it spawns engines: "tiny", or a directory (with tokenizer.json), and
// for embeddings "tiny-embed" or a directory.
func (m ModelConfig) builtinModelErr() error {
	if m.Engine != nil && m.Engine.Kind != string(engine.KindBuiltin) || len(engine.Spawned(m.Endpoints)) == 0 {
		return nil
	}
	isDir := func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
	path := m.Path
	if path == "" {
		path = m.Model
	}
	if path != builtin.TinyModel && !isDir(path) {
		return fmt.Errorf("model %s: the built-in engine loads %q or a model directory holding tokenizer.json, and %q is neither%s (set path, or engine mlc for an MLC model)",
			m.Model, builtin.TinyModel, path, suggest.DidYouMean(path, []string{builtin.TinyModel}))
	}
	if e := m.EmbeddingModel; e != "" && e != builtin.TinyEmbedModel && !isDir(e) {
		return fmt.Errorf("model %s: embedding_model %q: the built-in engine loads %q or a model directory%s",
			m.Model, e, builtin.TinyEmbedModel, suggest.DidYouMean(e, []string{builtin.TinyEmbedModel}))
	}
	return nil
}
