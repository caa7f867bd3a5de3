package chaos

import (
	"flag"
	"testing"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

// long selects the long form: the sizes, and its timing goals
// asserted.
var long = flag.Bool("chaos.long", false, "run the long form of the chaos suite (sizes and timing goals of issue 9)")

// TestMain lets the test binary double as the engine program, as the
// caddy binary does in production.
func TestMain(m *testing.M) { enginetest.Main(m) }
