package caddymlc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// cached_token_weight is a number, 0 or more, once; JSON is checked as
// the Caddyfile is.
func TestCachedTokenWeightOption(t *testing.T) {
	var r Handler
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\ncached_token_weight 0.25\n}")); err != nil {
		t.Fatal(err)
	}
	if r.CachedTokenWeight == nil || *r.CachedTokenWeight != 0.25 {
		t.Fatalf("cached_token_weight %v", r.CachedTokenWeight)
	}
	for body, want := range map[string]string{
		"cached_token_weight -1":                      `cached_token_weight "-1": want a number, 0 or more`,
		"cached_token_weight cheap":                   `cached_token_weight "cheap"`,
		"cached_token_weight 0.5 cached_token_weight": "wrong argument count",
	} {
		var r Handler
		err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\n" + body + "\n}"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Testfile:4") {
			t.Errorf("%q: %v, want %q at line 4", body, err, want)
		}
	}
	var j Handler
	if err := json.Unmarshal([]byte(`{"model":"tiny","mode":"whole","cached_token_weight":-0.5}`), &j); err != nil {
		t.Fatal(err)
	}
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "cached_token_weight") {
		t.Errorf("JSON cached_token_weight -0.5: %v", err)
	}
}
