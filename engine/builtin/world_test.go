package builtin

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Engines of one world report the same digest of its uid, whatever their
// PE; another uid gives another digest, which is a SHA-256 and not the
// uid itself.
func TestWorldUIDDigest(t *testing.T) {
	load := func(uid string, pe int) *world {
		t.Helper()
		w, err := loadWorld(func(k string) string {
			if k == protocol.EnvNVSHMEMConfig {
				return fmt.Sprintf(`{"uid":%s,"npes":2,"pe_start":%d}`, uid, pe)
			}
			return ""
		})
		if err != nil || w == nil {
			t.Fatalf("loadWorld: %v", err)
		}
		return w
	}
	a, b, other := load("[7,1,2,3]", 0), load("[7,1,2,3]", 1), load("[7,1,2,4]", 0)
	if a.uidDigest() != b.uidDigest() {
		t.Errorf("one world, two digests: %s, %s", a.uidDigest(), b.uidDigest())
	}
	if a.uidDigest() == other.uidDigest() {
		t.Errorf("two worlds, one digest %s", a.uidDigest())
	}
	if raw, err := hex.DecodeString(a.uidDigest()); err != nil || len(raw) != 32 {
		t.Errorf("digest %q: not 32 bytes of hex (%v)", a.uidDigest(), err)
	}
}

// query_engine_metrics reports the engine's world: pe_start, npes and the
// uid digest.
func TestMetricsReportWorld(t *testing.T) {
	te := newTestEngine(t, "", true)
	r := complete(t, te.client, te.url, protocol.PathCompletions, map[string]any{"prompt": []int{1}, "max_tokens": 1,
		"debug_config": map[string]any{"special_request": protocol.SpecialQueryEngineMetrics}})
	if pe, npes := extraInt(t, r.usage, protocol.ExtraPEStart), extraInt(t, r.usage, protocol.ExtraNPEs); pe != 0 || npes != 1 {
		t.Errorf("pe_start %d, npes %d: want the test world's 0 and 1", pe, npes)
	}
	var digest string
	if err := json.Unmarshal(r.usage.Extra[protocol.ExtraUIDDigest], &digest); err != nil || digest != (&world{}).uidDigest() {
		t.Errorf("%s: %q (%v), want the digest of the test world's uid", protocol.ExtraUIDDigest, digest, err)
	}
}
