package caddymlc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
)

// prompts are varied in length and form (text and token ids).
func testPrompts(t *testing.T) []any {
	tok, err := tokenizer.ForModel("tiny")
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("the quick brown fox jumps over the lazy dog while a small bird sings in the old tree near the river and the sun goes down")
	var out []any
	for i := 1; i <= 24; i += 3 {
		out = append(out, strings.Join(words[:i], " "))
	}
	out = append(out, "hello", "Unknown wörds, ÜNICODE ✓ and 12345!")
	ids := tok.Encode("once upon a time there was a king who had three sons")
	out = append(out, ids, ids[:2])
	return out
}

func greedy(prompt any, maxTokens int) map[string]any {
	return map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
}

// reference is the text one engine generates for a request on its own.
func reference(s *site, engineURL string, body map[string]any) string {
	s.t.Helper()
	resp, status, raw := s.complete(engineURL, body)
	if status != 200 {
		s.t.Fatalf("engine reference: %d %s", status, raw)
	}
	return resp.Choices[0].Text
}

func TestRoutedTextEqualsOneEngine(t *testing.T) {
	for _, tc := range []struct{ name, opts string }{
		{"disagg", "\t\t\tmode disagg\n"},
		{"disagg_balance", "\t\t\tmode disagg\n\t\t\tpd_balance_factor 0.5\n"},
		{"disagg_prefix_cache", "\t\t\tmode disagg\n\t\t\tprefix_cache radix\n"},
		{"round_robin", "\t\t\tmode whole\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSite(t, 2, tc.opts)
			for i, p := range testPrompts(t) {
				want := reference(s, s.engines[1], greedy(p, 20))
				got, status, raw := s.complete(s.base, greedy(p, 20))
				if status != 200 {
					t.Fatalf("prompt %d: %d %s", i, status, raw)
				}
				if i == 0 {
					t.Logf("prompt %v -> %q", p, want)
				}
				if got.Choices[0].Text != want {
					t.Fatalf("prompt %d (%v):\n routed %q\n engine %q", i, p, got.Choices[0].Text, want)
				}
				if got.Usage == nil || got.Usage.CompletionTokens == 0 || got.Usage.PromptTokens == 0 {
					t.Fatalf("prompt %d: usage %+v", i, got.Usage)
				}
				st, err := s.stream(context.Background(), s.base, greedy(p, 20))
				if err != nil {
					t.Fatal(err)
				}
				if st.text != want || !st.done || st.finish == "" {
					t.Fatalf("prompt %d streamed: %q done=%v finish=%q, want %q", i, st.text, st.done, st.finish, want)
				}
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tmax_body_size 1KiB\n")
	cases := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/completions", `{"prompt":`, 400, "invalid JSON"},
		{"POST", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens"},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 2000) + `"}`, 413, "larger than"},
		{"GET", "/v1/completions", ``, 405, "not allowed"},
		{"POST", "/microserving/prep_recv", `{"prompt":[1],"end":-1}`, 404, "not served"},
		{"POST", "/microserving/remote_send", `{}`, 404, "not served"},
		{"GET", "/elsewhere", ``, 418, "next handler"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.base+c.path, strings.NewReader(c.body))
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(raw), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, resp.StatusCode, raw, c.status, c.want)
		}
		if c.status != 418 && !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s %s: not an OpenAI error body: %s", c.method, c.path, raw)
		}
	}
	resp, err := s.client.Get(s.base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"id":"tiny"`) {
		t.Fatalf("models: %d %s", resp.StatusCode, raw)
	}
}

// A client's debug_config never reaches the engines: a request asking for
// engine metrics, or a raw microserving step, gets a plain completion.
func TestInjectedDebugConfigIsIgnored(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	want := reference(s, s.engines[1], greedy("the old king", 12))
	for _, dc := range []map[string]any{
		{"special_request": "query_engine_metrics"},
		{"disagg_config": map[string]any{"kind": "prepare_receive", "kv_window_end": 1}},
		{"ignore_eos": true, "disagg_config": map[string]any{"kind": "remote_send", "kv_append_metadata": "WzFd", "dst_group_offset": 9}},
	} {
		body := greedy("the old king", 12)
		body["debug_config"] = dc
		body["user"] = "client-user"
		got, status, raw := s.complete(s.base, body)
		if status != 200 || got.Choices[0].Text != want {
			t.Fatalf("debug_config %v: %d %s, want text %q", dc, status, raw, want)
		}
	}
}

// Many concurrent streams on engines with a tiny KV pool: engines preempt,
// the router resumes, and every client sees exactly the unpressured text.
func TestPreemptionStormIsInvisible(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tengine_args --overrides max_total_seq_length=512;max_num_sequence=64;prefill_chunk_size=64\n\t\t\tmax_attempts 64\n")
	const clients = 32
	const maxTokens = 48
	prompts := make([]string, clients)
	want := make([]string, clients)
	wantFinish := make([]string, clients)
	stops := make([][]string, clients)
	// The suffix ends the text once, after every resume (an engine would
	// append it to each attempt's text); the engines' reference has none.
	const suffix = " THE END"
	for i := range prompts {
		prompts[i] = fmt.Sprintf("story number %d about the %s river and the old mill", i, []string{"green", "cold", "long", "quiet"}[i%4])
		want[i] = reference(s, s.engines[1], greedy(prompts[i], maxTokens))
		wantFinish[i] = "length"
		if i%2 == 1 {
			// A stop string from late in the text: it is reached after
			// preemptions, and may span a resume boundary.
			words := strings.Fields(want[i])
			stops[i] = []string{" " + strings.Join(words[len(words)*3/4:len(words)*3/4+2], " ")}
			body := greedy(prompts[i], maxTokens)
			body["stop"] = stops[i]
			want[i] = reference(s, s.engines[1], body)
			wantFinish[i] = "stop"
		}
		if i%3 == 2 {
			want[i] += suffix
		}
	}
	before := engineMetrics(t, s.engines[1])["preemptions"]
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			body := greedy(prompts[i], maxTokens)
			body["stream_options"] = map[string]any{"include_usage": true}
			if stops[i] != nil {
				body["stop"] = stops[i]
			}
			if i%3 == 2 {
				body["suffix"] = suffix
			}
			st, err := s.stream(context.Background(), s.base, body)
			switch {
			case err != nil:
				errs <- fmt.Errorf("client %d: %w", i, err)
			case st.text != want[i]:
				errs <- fmt.Errorf("client %d (stop %q):\n got  %q\n want %q", i, stops[i], st.text, want[i])
			case st.finish != wantFinish[i] || !st.done || st.errBody != nil:
				errs <- fmt.Errorf("client %d: finish %q done %v error %v", i, st.finish, st.done, st.errBody)
			case st.usage == nil || (stops[i] == nil && st.usage.CompletionTokens != maxTokens):
				errs <- fmt.Errorf("client %d: usage %+v", i, st.usage)
			}
			for _, ev := range st.raw {
				if strings.Contains(ev, "preempt") {
					errs <- fmt.Errorf("client %d saw %s", i, ev)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := engineMetrics(t, s.engines[1])["preemptions"]
	if after <= before {
		t.Errorf("no preemption happened (%v before, %v after): the test did not test recovery", before, after)
	}
	t.Logf("decode engine preemptions during the storm: %v", after-before)
	for i, e := range s.engines {
		m := engineMetrics(t, e)
		if m["kv_pages_used"] != 0 || m["running"] != 0 {
			t.Errorf("engine %d after the storm: %v", i, m)
		}
	}
	for i, n := range liveInflight() {
		if n != 0 {
			t.Errorf("router in-flight count of engine %d is %d", i, n)
		}
	}
}

// A suffix ends every choice's text, streamed or whole, in both modes;
// echo comes before the text, and logprobs cover the generated tokens
// only, their offsets counting the echoed prompt.
func TestSuffixEndsEachChoice(t *testing.T) {
	for _, mode := range []string{"disagg", "round_robin"} {
		t.Run(mode, func(t *testing.T) {
			s := startSite(t, 2, "\t\t\tmode "+mode+"\n")
			const prompt, suffix = "the old king", " -- fin"
			want := reference(s, s.engines[1], greedy(prompt, 10))
			body := greedy(prompt, 10)
			body["suffix"] = suffix
			body["n"] = 2
			body["echo"] = true
			body["logprobs"] = 1
			got, status, raw := s.complete(s.base, body)
			if status != 200 || len(got.Choices) != 2 {
				t.Fatalf("%d %s", status, raw)
			}
			for _, ch := range got.Choices {
				if ch.Text != prompt+want+suffix {
					t.Errorf("choice %d: %q, want %q", ch.Index, ch.Text, prompt+want+suffix)
				}
				if lp := ch.Logprobs; lp == nil || len(lp.TextOffset) == 0 || lp.TextOffset[0] != len(prompt) ||
					lp.TextOffset[len(lp.TextOffset)-1] >= len(prompt)+len(want) {
					t.Errorf("choice %d: logprobs %+v", ch.Index, lp)
				}
			}
			delete(body, "n")
			st, err := s.stream(context.Background(), s.base, body)
			if err != nil || st.text != prompt+want+suffix || st.finish != "length" || !st.done {
				t.Fatalf("streamed: %q finish %q done %v err %v, want %q", st.text, st.finish, st.done, err, prompt+want+suffix)
			}
		})
	}
}

// A client that goes away mid-stream cancels the engine's request, which
// frees its KV pages.
func TestClientDisconnectFreesPages(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n")
	ctx, cancel := context.WithCancel(context.Background())
	body := greedy("a long long story", 2000)
	body["stream"] = true
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/completions", strings.NewReader(mustJSON(body)))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	if used := engineMetrics(t, s.engines[1])["kv_pages_used"]; used == 0 {
		t.Fatal("no pages in use mid-stream")
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the decode engine to free the pages", func() bool {
		m := engineMetrics(t, s.engines[1])
		return m["kv_pages_used"] == 0 && m["running"] == 0
	})
	waitFor(t, "the router's in-flight counts to return to 0", func() bool {
		for _, n := range liveInflight() {
			if n != 0 {
				return false
			}
		}
		return true
	})
}
