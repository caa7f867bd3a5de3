package router

import (
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// A disagg config that lacks a prefill or a decode endpoint is told the fix
// that fits it as written, never one that would not help (two role prefill
// endpoints were once told to "add a second endpoint").
func TestSplitRolesHints(t *testing.T) {
	cases := []struct {
		roles []string
		want  string
	}{
		{[]string{""}, "can decode: add a second endpoint (the first prefills, the others decode), or give this one role any"},
		{[]string{"prefill", "prefill"}, "can decode: give one of them role decode (or any)"},
		{[]string{"decode", "decode", "decode"}, "can prefill: give one of them role prefill (or any)"},
		{[]string{"prefill"}, "can decode: add an endpoint with role decode, or give this one role any"},
		{[]string{"decode"}, "can prefill: add an endpoint with role prefill, or give this one role any"},
	}
	for _, c := range cases {
		var eps []engine.Endpoint
		for i, role := range c.roles {
			eps = append(eps, engine.Endpoint{Host: "h", Port: i + 1, GPUs: 1, Role: role})
		}
		_, _, err := SplitRoles(eps)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("roles %q: error %v, want it to end %q", c.roles, err, c.want)
		}
	}
}
