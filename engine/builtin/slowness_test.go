package builtin

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestSlownessFlagsAndEndpoint checks that --prefill-delay and
// --decode-delay make the engine slower by at least what they say, that
// POST /builtin/slowness replaces them at run time and answers the old
// ones, and that the text stays the same however slow the engine is.
func TestSlownessFlagsAndEndpoint(t *testing.T) {
	te := newTestEngine(t, "", false, "--prefill-delay", "2ms")
	req := greedy(clip(prompts(3)[1], 40), 4)
	begin := time.Now()
	slow := complete(t, te.client, te.url, protocol.PathCompletions, req)
	n := slow.usage.PromptTokens
	if took, least := time.Since(begin), time.Duration(n)*2*time.Millisecond; took < least {
		t.Fatalf("%d prompt tokens at 2ms each took %v, want at least %v", n, took, least)
	}

	status, body := post(t, te.client, te.url+protocol.PathSlowness, map[string]any{"decode_delay_us": 50_000})
	var old protocol.Slowness
	if status != http.StatusOK || json.Unmarshal(body, &old) != nil {
		t.Fatalf("POST %s: %d %s", protocol.PathSlowness, status, body)
	}
	if old.PrefillPerToken != 2*time.Millisecond || old.DecodePerStep != 0 {
		t.Fatalf("the answer is %+v, want the flags' 2ms per prompt token", old)
	}
	begin = time.Now()
	again := complete(t, te.client, te.url, protocol.PathCompletions, req)
	if took := time.Since(begin); took < 3*50*time.Millisecond {
		t.Fatalf("4 tokens (3 decode steps) at 50ms a step took %v", took)
	}
	if again.texts[0] != slow.texts[0] {
		t.Fatalf("text changed with the slowness: %q, then %q", slow.texts[0], again.texts[0])
	}
	if got := te.e.Slowness(); got.DecodePerStep != 50*time.Millisecond || got.PrefillPerToken != 0 {
		t.Fatalf("slowness now %+v", got)
	}

	for _, bad := range []map[string]any{{"decode_delay_us": -1}, {"prefill_delay_us": 11_000_000}} {
		if status, body := post(t, te.client, te.url+protocol.PathSlowness, bad); status != http.StatusBadRequest {
			t.Fatalf("POST %v: %d %s, want 400", bad, status, body)
		}
	}
	if _, err := ParseArgs([]string{"tiny", "--decode-delay", "-1ms"}, nopWriter{}); err == nil {
		t.Fatal("--decode-delay -1ms was accepted")
	}
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
