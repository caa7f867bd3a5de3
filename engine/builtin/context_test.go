package builtin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// wantContextError checks MLC's answer to a prompt longer than the input
// limit: a 400 with its message, typed and coded as OpenAI does, about
// param.
func wantContextError(t *testing.T, what string, status int, body []byte, param string, prompt, limit int) {
	t.Helper()
	msg := fmt.Sprintf("Request prompt has %d tokens in total, larger than the model input length limit %d.", prompt, limit)
	perr := protocol.ParseError(status, body)
	if status != http.StatusBadRequest || perr == nil || perr.Type != protocol.ErrTypeInvalidRequest ||
		perr.Param == nil || *perr.Param != param || perr.Code == nil || *perr.Code != codeContextLength || perr.Message != msg {
		t.Errorf("%s: %d %s, want a 400 context_length_exceeded about %s saying %q", what, status, body, param, msg)
	}
}

// ignoringEOS is a greedy request that runs to its max_tokens or the
// context.
func ignoringEOS(prompt any, maxTokens int) map[string]any {
	r := with(greedy(prompt, maxTokens), "debug_config", map[string]any{"ignore_eos": true})
	if maxTokens < 0 {
		delete(r, "max_tokens")
	}
	return r
}

// TestMaxTokensAsMLC checks that max_tokens is never held against the
// context, as in MLC: beyond it, or absent, a generation runs until the
// prompt and its tokens fill the context, and ends with "length".
func TestMaxTokensAsMLC(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=512", false)
	ids := tiny.New().Encode(strings.Repeat(" the sun", 5)) // 10 tokens
	for _, c := range []struct {
		maxTokens, want int
	}{
		{1_000_000_000, 502}, // MLC does not refuse it
		{-1, 502},            // none: to the context, not a default of 256
		{300, 300},
		{502, 502},
	} {
		for _, stream := range []bool{false, true} {
			req := with(ignoringEOS(ids, c.maxTokens), "stream", stream, "stream_options", map[string]any{"include_usage": stream})
			if !stream {
				delete(req, "stream_options")
			}
			r := complete(t, te.client, te.url, protocol.PathCompletions, req)
			if r.finish[0] != protocol.FinishLength || r.usage.CompletionTokens != c.want || r.texts[0] == "" {
				t.Errorf("max_tokens %d, stream %v: %s after %+v, want length after %d tokens", c.maxTokens, stream, r.finish[0], r.usage, c.want)
			}
		}
	}
}

// TestPromptBeyondContext checks MLC's answers to prompts the context
// cannot hold: longer than the input limit, a 400 on every call that
// carries a prompt, before anything runs or is reserved; of exactly the
// limit, no room for a token: no text, "length", a usage of zeros.
func TestPromptBeyondContext(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tooLong := tiny.New().Encode(strings.Repeat(" the sun", 128) + " the") // 257 tokens
	for _, path := range []string{protocol.PathCompletions, protocol.PathPrepRecv, protocol.PathRemoteSend, protocol.PathStartGenerate} {
		for _, stream := range []bool{false, true} {
			body := map[string]any{"prompt": tooLong, "max_tokens": 1, "user": "u", "end": -1, "begin": 0,
				"kv_addr_info": protocol.KVAppendMetadata{{{Start: 0, Length: 9}}}.Encode(), "recv_rank": 0, "stream": stream}
			status, b := post(t, te.client, te.url+path, body)
			wantContextError(t, fmt.Sprintf("%s stream %v", path, stream), status, b, "prompt", 257, 256)
		}
	}
	if m, _ := te.e.Metrics(); m.Prepared+m.Waiting+m.Running != 0 || m.Pages.Used != 0 || m.PrefillTokens != 0 {
		t.Fatalf("a refused request left state behind: %+v", m)
	}

	full := tooLong[:256]
	for _, stream := range []bool{false, true} {
		req := with(greedy(full, 5), "n", 2, "stream", stream)
		if stream {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
		r := complete(t, te.client, te.url, protocol.PathCompletions, req)
		if strings.Join(r.texts, "") != "" || r.finish[0] != protocol.FinishLength || r.finish[1] != protocol.FinishLength ||
			r.usage == nil || r.usage.PromptTokens+r.usage.CompletionTokens+r.usage.TotalTokens != 0 {
			t.Errorf("stream %v: a prompt that fills the context: %q %v %+v, want no text, length, a usage of zeros", stream, r.texts, r.finish, r.usage)
		}
	}
	// A reservation made for such a prompt is freed when start_generate
	// answers it.
	status, b := post(t, te.client, te.url+protocol.PathPrepRecv, map[string]any{"prompt": full, "end": -1, "user": "full"})
	if status != http.StatusOK {
		t.Fatalf("prep_recv of a prompt that fills the context: %d %s", status, b)
	}
	r := complete(t, te.client, te.url, protocol.PathStartGenerate, map[string]any{"prompt": full, "begin": 0, "user": "full", "max_tokens": 5})
	if r.texts[0] != "" || r.finish[0] != protocol.FinishLength {
		t.Errorf("start_generate of a prompt that fills the context: %q %v", r.texts, r.finish)
	}
}

// TestContextWindowSize checks that context_window_size (from --overrides
// or the model's mlc-chat-config.json) bounds a sequence below the KV
// cache's capacity, as MLC's max_single_sequence_length does.
func TestContextWindowSize(t *testing.T) {
	dir := spmModel(t, `{"context_window_size": 48}`)
	for _, c := range []struct {
		name, model, overrides string
		limit                  int
	}{
		{"override", TinyModel, "max_total_seq_length=512;context_window_size=64", 64},
		{"mlc-chat-config.json", dir, "max_total_seq_length=512", 48},
		{"override over mlc-chat-config.json", dir, "max_total_seq_length=512;context_window_size=40", 40},
		{"bounded by the KV cache", TinyModel, "max_total_seq_length=128;context_window_size=4096", 128},
	} {
		t.Run(c.name, func(t *testing.T) {
			te := newTestEngineModel(t, c.model, c.overrides, false)
			prompt := []int{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
			r := complete(t, te.client, te.url, protocol.PathCompletions, ignoringEOS(prompt, -1))
			if r.finish[0] != protocol.FinishLength || r.usage.CompletionTokens != c.limit-len(prompt) {
				t.Errorf("%s after %+v, want length after %d tokens", r.finish[0], r.usage, c.limit-len(prompt))
			}
			long := make([]int, c.limit+1)
			for i := range long {
				long[i] = 5 + i%7
			}
			status, b := post(t, te.client, te.url+protocol.PathCompletions, greedy(long, 1))
			wantContextError(t, "one token too many", status, b, "prompt", c.limit+1, c.limit)
		})
	}
}
