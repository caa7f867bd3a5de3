package caddymlc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
)

// keyCommand is `caddy mlc-key new`, which makes an API key.
var keyCommand = caddycmd.Command{
	Name:  "mlc-key",
	Usage: "new <name> --file <keys file> [--models a,b] [--expires <RFC 3339 time>]",
	Short: "Makes an API key for an mlc_router keys file",
	Long: `
Makes a random API key for <name> (the tenant of its requests), prints it
once on stdout, and appends its line ({"name", "sha256", "models",
"expires"}: the key's SHA-256, never the key) to the keys file, created
0600 if need be. A running Caddy whose mlc_router reads that file accepts
the key within a second, without a reload. --models limits the key to
those models; --expires ends it. Revoke keys with DELETE /mlc/keys/{name}
on the admin API, or by deleting their lines.`,
	CobraFunc: func(cmd *cobra.Command) {
		cmd.Flags().String("file", "", "the keys file (required)")
		cmd.Flags().String("models", "", "the models the key may use, comma-separated (default: every model)")
		cmd.Flags().String("expires", "", "when the key stops being accepted, RFC 3339 (default: never)")
		cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
			return runKeyCommand(fl, os.Stdout)
		})
	},
}

// runKeyCommand runs `mlc-key new`, printing the key on out.
func runKeyCommand(fl caddycmd.Flags, out io.Writer) (int, error) {
	args := fl.Args()
	if len(args) != 2 || args[0] != "new" {
		return caddy.ExitCodeFailedStartup, errors.New("usage: caddy mlc-key new <name> --file <keys file> [--models a,b] [--expires <RFC 3339 time>]")
	}
	file := fl.String("file")
	if file == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--file <keys file> is required")
	}
	line := apikeys.KeyLine{Name: args[1]}
	for m := range strings.SplitSeq(fl.String("models"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			line.Models = append(line.Models, m)
		}
	}
	if e := fl.String("expires"); e != "" {
		t, err := time.Parse(time.RFC3339, e)
		if err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("--expires %q: want an RFC 3339 time, such as 2030-01-02T15:04:05Z", e)
		}
		line.Expires = t
	}
	key, err := apikeys.NewKey(file, line)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Fprintln(out, key)
	return caddy.ExitCodeSuccess, nil
}
