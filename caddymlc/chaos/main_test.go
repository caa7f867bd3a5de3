package chaos

import (
	"flag"
	"os"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/builtin"
)

// long selects the long form: the sizes, and its timing goals
// asserted.
var long = flag.Bool("chaos.long", false, "run the long form of the chaos suite (sizes and timing goals of issue 9)")

// TestMain lets the test binary double as the engine program, as the
// caddy binary does in production.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == engine.BuiltinSubcommand {
		os.Exit(builtin.Main(os.Args[2:]))
	}
	flag.Parse()
	os.Exit(m.Run())
}
