package caddymlc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The JSON form of a policy is its module, name inline, as reverse_proxy's
// selection_policy; a bare name, the form of configs written before
// policies were modules, still loads that module, and an empty one the
// default.
func TestPolicyJSON(t *testing.T) {
	for _, tc := range []struct {
		name, replace string
		want          string
		prefixes      bool
	}{
		{"module", "", "prefix_aware", true},
		{"bare name", `"prefix_aware"`, "prefix_aware", true},
		{"default", "", "least_loaded", false},
		{"empty name", `""`, "least_loaded", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := "\t\t\tpolicy prefix_aware\n"
			if tc.name == "default" {
				policy = ""
			}
			ports := freePorts(t, 2)
			cf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n\t\tendpoint 127.0.0.1:%d\n%s\t}\n}\n", ports[0], ports[1], policy)
			cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
			if err != nil {
				t.Fatal(err)
			}
			module := []byte(`"policy":{"policy":"prefix_aware"}`)
			if policy != "" && !bytes.Contains(cfg, module) {
				t.Fatalf("adapted JSON lacks %s:\n%s", module, cfg)
			}
			if tc.replace != "" {
				cfg = bytes.Replace(cfg, module, []byte(`"policy":`+tc.replace), 1)
			}
			loadConfig(t, cfg)
			t.Cleanup(func() { stopCaddy(t) })
			st := liveNow().lifecycle.Statuses()
			if len(st) != 1 || st[0].Policy != tc.want || st[0].PrefixIndex != tc.prefixes {
				t.Fatalf("status %+v, want policy %s (reads prefixes %v)", st, tc.want, tc.prefixes)
			}
		})
	}
}
