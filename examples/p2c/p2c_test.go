package p2c

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The mlc_router handler the test's Caddyfile names, and its app.
	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// TestMain lets the test binary be the built-in engine the router starts.
func TestMain(m *testing.M) { enginetest.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden file")

// A Caddy with this package names the policy in a Caddyfile, and the
// router serves through it exactly the text one engine gives alone.
func TestServesThroughTheRouter(t *testing.T) {
	ports := testnet.FreePorts(t, 2)
	cf := fmt.Sprintf(`{
	admin off
	auto_https off
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		policy p2c 3
		endpoint 127.0.0.1:%d
	}
}
`, ports[0], ports[1])
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte(`"policy":{"choices":3,"policy":"p2c"}`); !bytes.Contains(cfg, want) {
		t.Fatalf("adapted JSON lacks %s:\n%s", want, cfg)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	body := `{"prompt":"the cat sat on","max_tokens":16,"temperature":0}`
	routed := complete(t, fmt.Sprintf("http://127.0.0.1:%d", ports[0]), body) // waits for the engine
	alone := complete(t, fmt.Sprintf("http://127.0.0.1:%d", ports[1]), body)
	if routed == "" || routed != alone {
		t.Fatalf("through the router %q, from the engine alone %q", routed, alone)
	}
}

func complete(t *testing.T, base, body string) string {
	t.Helper()
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("%s: %d %+v %v", base, resp.StatusCode, out, err)
	}
	return out.Choices[0].Text
}

// Of the engines it draws it takes the least loaded: with many draws,
// the idle engine of two; with one, any.
func TestChoosesTheLeastLoadedOfItsDraws(t *testing.T) {
	cands := []router.Candidate{{InFlight: 5}, {InFlight: 1, Prefilling: 1}, {InFlight: 4}}
	many := P2C{Choices: 64} // each engine is drawn but with odds 3·(2/3)^64
	for range 20 {
		if got := many.Choose(&router.Request{}, cands); got != 1 {
			t.Fatalf("chose %d of %+v", got, cands)
		}
	}
	one := P2C{Choices: 1}
	seen := map[int]bool{}
	for range 200 {
		seen[one.Choose(&router.Request{}, cands)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("one draw chose only %v", seen)
	}
}

func TestConfig(t *testing.T) {
	var p P2C
	if err := p.Provision(caddy.Context{}); err != nil || p.Choices != 2 || p.Validate() != nil {
		t.Fatalf("default: %+v %v", p, err)
	}
	if err := (&P2C{Choices: -1}).Validate(); err == nil {
		t.Fatal("choices -1 accepted")
	}
	for _, bad := range []string{"policy p2c 0", "policy p2c x", "policy p2c 2 3"} {
		cf := fmt.Sprintf("{\n\tadmin off\n}\n:1 {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n\t\tendpoint 127.0.0.1:2\n\t\t%s\n\t}\n}\n", bad)
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The example Caddyfile adapts to the golden JSON beside it (go test
// -update rewrites it); caddymlc's tests, which cannot import this
// package, check the other examples.
func TestAdaptExample(t *testing.T) {
	src, err := os.ReadFile("../p2c.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": "p2c.Caddyfile"})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	var pretty map[string]any
	if err := json.Unmarshal(out, &pretty); err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(pretty, "", "\t")
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile("../p2c.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("../p2c.json")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("adapted JSON differs from ../p2c.json (%v):\n%s", err, got)
	}
}
