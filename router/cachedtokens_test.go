package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// usageOfCall posts a completion (streamed with include_usage when
// stream) and returns the usage the router answered.
func usageOfCall(t testing.TB, base string, body map[string]any, stream bool) protocol.Usage {
	t.Helper()
	if stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	} else {
		delete(body, "stream")
		delete(body, "stream_options")
	}
	b, _ := json.Marshal(body)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(base+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var usage *protocol.Usage
	if !stream {
		var out protocol.CompletionResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		usage = out.Usage
	} else {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var chunk protocol.CompletionResponse
			if err := json.Unmarshal([]byte(data), &chunk); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
			if chunk.Usage != nil {
				usage = chunk.Usage
			}
		}
	}
	if usage == nil {
		t.Fatal("no usage in the answer")
	}
	if usage.PromptTokensDetails == nil {
		t.Fatalf("usage without prompt_tokens_details: %+v", usage)
	}
	return *usage
}

// prefilled is the prompt tokens the engines computed, by their own
// counters.
func prefilled(t testing.TB, engines []string) int {
	n := 0
	for _, url := range engines {
		n += int(engineMetrics(t, url)["prefill_tokens"])
	}
	return n
}

// What a request's usage reports as cached is exactly what the engines did
// not compute: over an agent-like session (each turn's prompt is the last
// one's plus a tool result), the prompt tokens less the cached ones add
// up to the engines' own count of prompt tokens computed, in whole mode
// and in disagg (where the prefill engine's own cache counts), streamed
// and not; the turns after the first find most of their prompt cached;
// and caddy_mlc_cached_prompt_tokens_total counts the same.
func TestCachedTokensAreWhatTheEnginesReused(t *testing.T) {
	for _, mode := range []string{ModeWhole, ModeDisagg} {
		t.Run(mode, func(t *testing.T) {
			engines := 1
			if mode == ModeDisagg {
				engines = 2
			}
			c := startCore(t, engines, Config{Mode: mode, MaxPrefillQueue: -1, PrefixCache: engine.PrefixCacheRadix}, PrefixAware{})
			before := prefilled(t, c.engines)
			counter := sharedMetrics().cache.cached.WithLabelValues(c.r.Model)
			counted := testutil.ToFloat64(counter)
			prompt := seq(3, 5*kvPageTokens+3)
			computed, cachedLater := 0, 0
			for turn := range 4 {
				u := usageOfCall(t, c.base, greedy(prompt, 4), turn%2 == 1)
				cached := u.PromptTokensDetails.CachedTokens
				if u.PromptTokens != len(prompt) || cached < 0 || cached >= len(prompt) {
					t.Fatalf("turn %d: usage %+v for a prompt of %d", turn, u, len(prompt))
				}
				t.Logf("turn %d: %d prompt tokens, %d cached", turn, u.PromptTokens, cached)
				computed += u.PromptTokens - cached
				if turn > 0 {
					cachedLater += cached
					if cached < len(prompt)/2 {
						t.Errorf("turn %d: %d of %d prompt tokens cached", turn, cached, len(prompt))
					}
				}
				prompt = append(prompt, seq(100+turn*40, 2*kvPageTokens+5)...) // the tool's result
			}
			if got := prefilled(t, c.engines) - before; got != computed {
				t.Fatalf("the engines computed %d prompt tokens; the usage says %d were not cached", got, computed)
			}
			if cachedLater == 0 {
				t.Fatal("nothing cached after the first turn")
			}
			if got := testutil.ToFloat64(counter) - counted; got != float64(cachedLater) {
				t.Fatalf("caddy_mlc_cached_prompt_tokens_total grew by %v; the usages say %d", got, cachedLater)
			}
		})
	}
}

// A request's budget cost prices its cached prompt tokens at the weight.
func TestCachedTokenWeightPricesTheBudget(t *testing.T) {
	for _, tc := range []struct {
		prompt, cached, generated int
		weight                    float64
		want                      int64
	}{
		{100, 0, 10, 0.1, 110},
		{100, 80, 10, 1, 110},
		{100, 80, 10, 0.1, 20 + 8 + 10},
		{100, 80, 10, 0, 30},
		{100, 81, 0, 0.5, 19 + 41}, // 40.5 rounds up
		{100, -1, 5, 0, 105},       // unknown: nothing cached
		{10, 50, 0, 0, 0},          // never more than the prompt
	} {
		if got := budgetCost(tc.prompt, tc.cached, tc.generated, tc.weight); got != tc.want {
			t.Errorf("budgetCost(%d, %d, %d, %v) = %d, want %d", tc.prompt, tc.cached, tc.generated, tc.weight, got, tc.want)
		}
	}
}

// The APIs that tell usage before the first token tell the cached tokens
// there, as the final usage does, when the engines said by then: in
// disagg mode the window's (prep_recv), in whole mode the built-in
// engine's first chunk. A second ask of the same conversation finds it
// in the cache, and its message_start and response.created say so; the
// first says what it found too (nothing, or the chat template's head).
func TestCachedTokensBeforeTheFirstToken(t *testing.T) {
	system := strings.Repeat("You are a careful agent. ", 20)
	for _, mode := range []string{ModeWhole, ModeDisagg} {
		t.Run(mode, func(t *testing.T) {
			engines := map[string]int{ModeWhole: 1, ModeDisagg: 2}[mode]
			c := startCore(t, engines, Config{Mode: mode, MaxPrefillQueue: -1, PrefixCache: engine.PrefixCacheRadix}, nil)
			msg := map[string]any{"model": "tiny", "system": system, "max_tokens": 4, "temperature": 0, "stream": true,
				"messages": []map[string]any{{"role": "user", "content": "list the files"}}}
			resp := map[string]any{"model": "tiny", "instructions": system, "max_output_tokens": 4, "temperature": 0, "stream": true, "input": "list the files"}
			for ask := range 2 {
				start, end := messagesCacheReads(t, c.base, msg)
				if start != end || ask == 1 && end == 0 {
					t.Errorf("messages, ask %d: message_start says %d cached, message_delta %d", ask+1, start, end)
				}
				start, end = responsesCacheReads(t, c.base, resp)
				if start != end || ask == 1 && end == 0 {
					t.Errorf("responses, ask %d: response.created says %d cached, response.completed %d", ask+1, start, end)
				}
			}
		})
	}
}

// messagesCacheReads streams a message and returns the cache reads its
// message_start and message_delta say.
func messagesCacheReads(t *testing.T, base string, body map[string]any) (start, end int) {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, base+protocol.PathMessages, body)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	start, end = -1, -1
	for _, ev := range namedEvents(t, raw) {
		var e struct {
			Message struct{ Usage protocol.MessagesUsage }
			Usage   protocol.MessagesUsage
		}
		if err := json.Unmarshal(ev.data, &e); err != nil {
			t.Fatal(err)
		}
		switch ev.name {
		case protocol.EventMessageStart:
			start = e.Message.Usage.CacheReadInputTokens
		case protocol.EventMessageDelta:
			end = e.Usage.CacheReadInputTokens
		}
	}
	return start, end
}

// responsesCacheReads streams a response and returns the cached tokens
// its response.created (-1: no usage) and response.completed (or
// response.incomplete) say.
func responsesCacheReads(t *testing.T, base string, body map[string]any) (start, end int) {
	t.Helper()
	status, raw := callJSON(t, http.MethodPost, base+protocol.PathResponses, body)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	start, end = -1, -1
	for _, ev := range namedEvents(t, raw) {
		var e struct{ Response protocol.Response }
		if err := json.Unmarshal(ev.data, &e); err != nil {
			t.Fatal(err)
		}
		u := e.Response.Usage
		switch {
		case u == nil:
		case ev.name == protocol.EventResponseCreated:
			start = u.InputTokensDetails.CachedTokens
		case ev.name == protocol.EventResponseCompleted, ev.name == protocol.EventResponseIncomplete:
			end = u.InputTokensDetails.CachedTokens
		}
	}
	return start, end
}
