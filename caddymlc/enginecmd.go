package caddymlc

import (
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
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
