package caddymlc

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// docBlocks returns the fenced blocks after "<!-- ci: NAME -->" markers
// in a page, by name (as .ci/lib.sh's doc_block reads them).
func docBlocks(t *testing.T, page string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	re := regexp.MustCompile("(?m)^<!-- ci: ([a-z0-9-]+) -->\n```[a-z]*\n((?s:.*?))^```")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// Every Caddyfile of docs/keys.md adapts and validates (caddy validate:
// adapted, every module provisioned), and the keys are where it says.
func TestKeysDocValidates(t *testing.T) {
	blocks := docBlocks(t, "../docs/keys.md")
	if len(blocks) == 0 {
		t.Fatal("no <!-- ci: --> block in docs/keys.md")
	}
	for name, cf := range blocks {
		cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
		if err != nil {
			t.Fatalf("%s: adapt: %v", name, err)
		}
		var cfg caddy.Config
		if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := caddy.Validate(&cfg); err != nil {
			t.Fatalf("%s: validate: %v", name, err)
		}
		if name == "keys" && (!regexp.MustCompile(`"keys":"/etc/caddy/mlc-keys.jsonl"`).Match(cfgJSON)) {
			t.Errorf("%s: no keys in %s", name, cfgJSON)
		}
	}
}
