package caddymlc

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/suggest"
)

// The Caddyfile's errors teach: a wrong word is answered with the words
// that would do, and the nearest of them.

// choiceErr is the error of a value of option name that is not among
// choices: it lists them, with the nearest.
func choiceErr(d *caddyfile.Dispenser, name, got string, choices []string) error {
	return d.Errf("%s %q: want one of %s%s", name, got, strings.Join(choices, ", "), suggest.DidYouMean(got, choices))
}

// topLevelOptions are the options of mlc_router's block that a model
// block does not take.
var topLevelOptions = []string{"model", "tenant", "priority", "tenant_weight", "tenant_priority", "budget", "cached_token_weight", "slo_ttft", "slo_tpot",
	"tenant_slo", "priority_slo", "responses_store", "responses_ttl", "responses_max_size", "health_uri",
	"mcp_server", "mcp_allow", "mcp_timeout", "mcp_max_output", "mcp_max_rounds"}

// unknownOption is the error of an option name that is none of the
// block's: the block's options (with extra, those of the top level),
// and the nearest.
func unknownOption(d *caddyfile.Dispenser, name string, extra []string) error {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range subdirectives {
			if !yield(k) {
				return
			}
		}
		for _, k := range extra {
			if !yield(k) {
				return
			}
		}
	})
	return d.Errf("unknown subdirective %q%s; the options: %s", name, suggest.DidYouMean(name, names), strings.Join(names, ", "))
}
