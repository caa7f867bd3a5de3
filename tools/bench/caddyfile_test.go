package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-mlc/caddy-mlc/caddymlc"
)

// TestCaddyfilesAdapt checks every Caddyfile the bench writes with Caddy's
// own adapter, and what the router's config says.
func TestCaddyfilesAdapt(t *testing.T) {
	engines := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	for name, c := range map[string]struct {
		handler string
		h2c     bool
		want    []string
	}{
		"reverse_proxy": {reverseProxy(engines), false, []string{`"handler":"reverse_proxy"`, `"policy":"round_robin"`, `"dial":"127.0.0.1:9002"`}},
		"mlc_router":    {mlcRouter(engines, ""), false, []string{`"handler":"mlc_router"`, `"mode":"whole"`, `"external":true`}},
		"idle":          {mlcRouter(engines[:1], "15m"), true, []string{`"engine_timeout":900000000000`, `"h2c"`}},
		"disagg":        {mlcDisagg(engines[0], engines[1]), false, []string{`"mode":"disagg"`, `"role":"prefill"`, `"role":"decode"`}},
		"gate-on": {mlcTenants([]int{9001, 9002}, true), false, []string{`"mode":"whole"`, `"engine_args":["--overrides","max_num_sequence=8"]`,
			`"tenant":"{http.request.header.X-Tenant}"`, `"priority":"{http.request.header.X-Priority}"`}},
		"gate-off": {mlcTenants([]int{9001, 9002}, false), false, []string{`"max_inflight":-1`, `"tenant":"{http.request.header.X-Tenant}"`}},
		"replica":  {mlcTenantsExternal([]int{9001, 9002}), false, []string{`"max_inflight":8`, `"external":true`, `"tenant":"{http.request.header.X-Tenant}"`}},
		"budget":   {mlcBudget(engines, 6000), false, []string{`"tokens_per_minute":6000`, `"external":true`}},
		"policy":   {mlcPolicy(engines, "slo_aware"), false, []string{`"slo_aware"`, `"external":true`}},
	} {
		text := caddyfile(2999, 8999, t.TempDir(), c.h2c, c.handler)
		out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, text)
			continue
		}
		for _, w := range warnings {
			t.Errorf("%s: warning %s", name, w.Message)
		}
		if !json.Valid(out) {
			t.Fatalf("%s: invalid JSON", name)
		}
		for _, want := range append(c.want, `"listen":["127.0.0.1:8999"]`, `"admin":{"listen":"127.0.0.1:2999"`) {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: adapted config lacks %s:\n%s", name, want, out)
			}
		}
	}
}

// TestClusterCaddyfileAdapts checks the replicas' global option.
func TestClusterCaddyfileAdapts(t *testing.T) {
	text := caddyfileWith(2999, 8999, t.TempDir(), false, clusterOption(6391, 3), mlcTenantsExternal([]int{9001, 9002}))
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v\n%s", err, warnings, text)
	}
	for _, want := range []string{`"redis":"127.0.0.1:6391"`, `"replicas":3`, `"max_inflight":8`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted config lacks %s:\n%s", want, out)
		}
	}
}

// caddyfile is caddyfileWith without more global options, as a run of
// one replica writes it.
func caddyfile(adminPort, port int, storage string, h2c bool, handler string) string {
	return caddyfileWith(adminPort, port, storage, h2c, "", handler)
}
