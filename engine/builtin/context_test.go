package builtin

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// wantContextError checks a context_length_exceeded answer about param.
func wantContextError(t *testing.T, what string, status int, body []byte, param, msg string) {
	t.Helper()
	perr := protocol.ParseError(status, body)
	if status != http.StatusBadRequest || perr == nil || perr.Type != protocol.ErrTypeInvalidRequest ||
		perr.Param == nil || *perr.Param != param || perr.Code == nil || *perr.Code != codeContextLength ||
		!strings.Contains(perr.Message, msg) {
		t.Errorf("%s: %d %s, want a 400 context_length_exceeded about %s saying %q", what, status, body, param, msg)
	}
}

// TestMaxTokensBeyondContext checks that a prompt and max_tokens the
// context cannot hold is a 400 on every call that carries a request,
// before anything runs or is reserved, and that a request that fits
// exactly runs to its end.
func TestMaxTokensBeyondContext(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	ids := tiny.New().Encode(strings.Repeat(" the sun", 5)) // 10 tokens
	msg := "This model's maximum context length is 256 tokens. However, you requested 1000000010 tokens (10 in the prompt, 1000000000 for the completion). Please reduce the prompt or max_tokens."
	for _, path := range []string{protocol.PathCompletions, protocol.PathPrepRecv, protocol.PathRemoteSend, protocol.PathStartGenerate} {
		for _, stream := range []bool{false, true} {
			body := map[string]any{"prompt": ids, "max_tokens": 1_000_000_000, "user": "u", "end": -1, "begin": 0,
				"kv_addr_info": protocol.KVAppendMetadata{{{Start: 0, Length: 9}}}.Encode(), "recv_rank": 0, "stream": stream}
			status, b := post(t, te.client, te.url+path, body)
			wantContextError(t, fmt.Sprintf("%s stream %v", path, stream), status, b, "max_tokens", msg)
		}
	}
	if m, _ := te.e.Metrics(); m.Prepared+m.Waiting+m.Running != 0 || m.Pages.Used != 0 || m.PrefillTokens != 0 {
		t.Fatalf("a refused request left state behind: %+v", m)
	}
	status, b := post(t, te.client, te.url+protocol.PathCompletions, greedy(ids, math.MaxInt64))
	wantContextError(t, "max_tokens that overflows", status, b, "max_tokens", "you requested 9223372036854775817 tokens")
	status, b = post(t, te.client, te.url+protocol.PathCompletions, greedy(ids, 247))
	wantContextError(t, "one token too many", status, b, "max_tokens", "you requested 257 tokens (10 in the prompt, 247 for the completion)")

	exact := complete(t, te.client, te.url, protocol.PathCompletions, with(greedy(ids, 246), "debug_config", map[string]any{"ignore_eos": true}))
	if exact.finish[0] != "length" || exact.usage.CompletionTokens != 246 {
		t.Fatalf("max_tokens that fits exactly: %v %+v", exact.finish, exact.usage)
	}
	long := tiny.New().Encode(strings.Repeat(" the sun", 100)) // 200 tokens
	dflt := complete(t, te.client, te.url, protocol.PathCompletions, map[string]any{"prompt": long, "temperature": 0, "debug_config": map[string]any{"ignore_eos": true}})
	if dflt.finish[0] != "length" || dflt.usage.CompletionTokens != 56 {
		t.Fatalf("without max_tokens the default is bounded by the context (56 tokens): %v %+v", dflt.finish, dflt.usage)
	}
	tooLong := tiny.New().Encode(strings.Repeat(" the sun", 128))
	status, b = post(t, te.client, te.url+protocol.PathCompletions, greedy(tooLong, 1))
	wantContextError(t, "prompt longer than the context", status, b, "prompt", "256 tokens")
}
