package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
)

func TestCompletionStreamAndWhole(t *testing.T) {
	te := newTestEngine(t, "", false)
	req := greedy("the quick brown fox", 20)
	a := complete(t, te.client, te.url, "/v1/completions", req)
	b := complete(t, te.client, te.url, "/v1/completions", with(req, "stream", true, "stream_options", map[string]any{"include_usage": true}))
	if a.texts[0] != b.texts[0] || a.finish[0] != "length" || b.finish[0] != "length" {
		t.Fatalf("stream %q %v, whole %q %v", b.texts, b.finish, a.texts, a.finish)
	}
	if a.usage.CompletionTokens != 20 || b.usage == nil || b.usage.CompletionTokens != 20 || b.usage.PromptTokens != a.usage.PromptTokens {
		t.Fatalf("usage %+v %+v", a.usage, b.usage)
	}
	if !b.rawDone || b.chunks < 2 {
		t.Fatalf("stream of %d chunks, done %v", b.chunks, b.rawDone)
	}
	c := complete(t, te.client, te.url, "/v1/completions", with(req, "stream", true))
	if c.usage != nil || c.texts[0] != a.texts[0] {
		t.Fatalf("without include_usage: usage %+v, text %q", c.usage, c.texts[0])
	}
	if len(strings.Fields(a.texts[0])) != 20 {
		t.Errorf("want 20 words, got %q", a.texts[0])
	}
}

// TestTokenPromptEqualsText checks that a prompt given as ids is the same
// prompt as its text.
func TestTokenPromptEqualsText(t *testing.T) {
	te := newTestEngine(t, "", false)
	text := "hello, world: the end"
	ids := tiny.New().Encode(text)
	a := complete(t, te.client, te.url, "/v1/completions", greedy(text, 12))
	b := complete(t, te.client, te.url, "/v1/completions", greedy(ids, 12))
	if a.texts[0] != b.texts[0] {
		t.Fatalf("text prompt gives %q, ids give %q", a.texts[0], b.texts[0])
	}
}

// TestChunkedPrefill checks that the prefill chunk size does not change a
// single token.
func TestChunkedPrefill(t *testing.T) {
	whole := newTestEngine(t, "prefill_chunk_size=4096", false, "--prefix-cache-mode", "disable")
	chunked := newTestEngine(t, "prefill_chunk_size=7", false, "--prefix-cache-mode", "disable")
	for i, p := range prompts(10) {
		req := greedy(clip(p, 150), 10)
		a := complete(t, whole.client, whole.url, "/v1/completions", req)
		b := complete(t, chunked.client, chunked.url, "/v1/completions", req)
		if a.texts[0] != b.texts[0] {
			t.Fatalf("prompt %d: whole prefill %q, chunks of 7 %q", i, a.texts[0], b.texts[0])
		}
	}
}

func TestPrefixCache(t *testing.T) {
	cached := newTestEngine(t, "", false, "--prefix-cache-mode", "radix")
	plain := newTestEngine(t, "", false, "--prefix-cache-mode", "disable")
	long := prompts(40)[31] // about 150 words
	first := complete(t, cached.client, cached.url, "/v1/completions", greedy(long, 8))
	if n := extraInt(t, first.usage, "prefix_matched_length"); n != 0 {
		t.Fatalf("first request matched %d tokens", n)
	}
	m := cached.waitMetrics(func(m Metrics) bool { return true })
	if m.Pages.Cached == 0 {
		t.Fatalf("no page cached after a request: %+v", m.Pages)
	}
	// The request's end reports the engine's load as it ended (caddy-mlc's
	// extension): nothing else ran, and the pages it left are cached.
	if r, c, total := extraInt(t, first.usage, "running"), extraInt(t, first.usage, "kv_pages_cached"), extraInt(t, first.usage, "kv_pages_total"); r != 0 || c != m.Pages.Cached || total != m.Pages.Total {
		t.Fatalf("load at the request's end: running %d, cached %d of %d pages; then %+v", r, c, total, m.Pages)
	}
	second := long + " and then something else happens"
	got := complete(t, cached.client, cached.url, "/v1/completions", greedy(second, 8))
	want := complete(t, plain.client, plain.url, "/v1/completions", greedy(second, 8))
	if n := extraInt(t, got.usage, "prefix_matched_length"); n < 100 {
		t.Fatalf("second request matched only %d tokens", n)
	}
	if got.texts[0] != want.texts[0] {
		t.Fatalf("with the prefix cache %q, without %q", got.texts[0], want.texts[0])
	}
	// The same prompt again: all of it but the last token comes from the cache.
	again := complete(t, cached.client, cached.url, "/v1/completions", greedy(second, 8))
	if again.texts[0] != want.texts[0] {
		t.Fatalf("repeated prompt gives %q, want %q", again.texts[0], want.texts[0])
	}
}

// A prompt's pages are in the prefix cache once it is prefilled, not only
// once its request ends: a request with the same prefix that comes while
// the first still decodes shares them, and gets the same text as without
// the cache.
func TestPrefixCacheSharesARunningPrompt(t *testing.T) {
	cached := newTestEngine(t, "", false, "--prefix-cache-mode", "radix")
	plain := newTestEngine(t, "", false, "--prefix-cache-mode", "disable")
	long := prompts(40)[31]
	b, _ := json.Marshal(with(greedy(long, 3000), "stream", true, "debug_config", map[string]any{"ignore_eos": true}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cached.url+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := cached.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Its first token: the prompt is prefilled.
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	second := long + " and then something else happens"
	got := complete(t, cached.client, cached.url, "/v1/completions", greedy(second, 8))
	if m, err := cached.e.Metrics(); err != nil || m.Running == 0 {
		t.Skipf("inconclusive: the first request (3,000 tokens) ended before the second was answered (%+v, %v)", m, err)
	}
	if n := extraInt(t, got.usage, "prefix_matched_length"); n < 100 {
		t.Fatalf("a request sharing a running request's prompt matched only %d tokens", n)
	}
	want := complete(t, plain.client, plain.url, "/v1/completions", greedy(second, 8))
	if got.texts[0] != want.texts[0] {
		t.Fatalf("sharing a running prompt %q, without the cache %q", got.texts[0], want.texts[0])
	}
}

func TestEOSEndsGeneration(t *testing.T) {
	te := newTestEngine(t, "", false)
	req := with(greedy("the cat", 50), "logit_bias", map[string]float64{fmt.Sprint(tiny.EOS): 100})
	r := complete(t, te.client, te.url, "/v1/completions", req)
	if r.finish[0] != "stop" || r.texts[0] != "" || r.usage.CompletionTokens != 1 {
		t.Fatalf("EOS favoured: %q %v %+v", r.texts, r.finish, r.usage)
	}
	r = complete(t, te.client, te.url, "/v1/completions", with(req, "debug_config", map[string]any{"ignore_eos": true}, "max_tokens", 5))
	if r.finish[0] != "length" || r.usage.CompletionTokens != 5 {
		t.Fatalf("ignore_eos: %q %v %+v", r.texts, r.finish, r.usage)
	}
}

// TestStopStrings checks that a stop string ends the text as MLC's
// engine ends it: before the token in which the stop string begins (a
// token is never cut), streamed or not.
func TestStopStrings(t *testing.T) {
	te := newTestEngine(t, "", false)
	req := greedy("a story about the sea", 30)
	base := complete(t, te.client, te.url, "/v1/completions", req).texts[0]
	inside := midStop(t, base) // spans two tokens, starts inside a word
	at := strings.Index(base, inside)
	boundary := base[len(beforeToken(t, base, at)):at] // the token it starts in, up to it
	first := strings.Fields(base)[0][1:]               // inside the first token
	for _, c := range []struct {
		stops []string
		want  string
	}{
		{[]string{"zzz", inside}, beforeToken(t, base, at)},
		{[]string{boundary}, base[:strings.Index(base, boundary)]},
		{[]string{first}, ""},
	} {
		if len(c.stops) == 2 && c.want == base[:at] {
			t.Fatalf("stop %q starts a token: the case does not tell whole tokens from bytes", c.stops)
		}
		for _, stream := range []bool{false, true} {
			r := complete(t, te.client, te.url, "/v1/completions", with(req, "stop", c.stops, "stream", stream))
			if r.texts[0] != c.want || r.finish[0] != "stop" {
				t.Fatalf("stream %v: stop %q: got %q (%s), want %q", stream, c.stops, r.texts[0], r.finish[0], c.want)
			}
		}
	}
}

func TestSamplingSeeded(t *testing.T) {
	te := newTestEngine(t, "", false)
	req := map[string]any{"prompt": "once upon a time", "max_tokens": 15, "temperature": 0.8, "top_p": 0.9, "seed": 42, "n": 3}
	a := complete(t, te.client, te.url, "/v1/completions", req)
	b := complete(t, te.client, te.url, "/v1/completions", req)
	if len(a.texts) != 3 || strings.Join(a.texts, "|") != strings.Join(b.texts, "|") {
		t.Fatalf("seeded sampling differs: %q vs %q", a.texts, b.texts)
	}
	st := complete(t, te.client, te.url, "/v1/completions", with(req, "stream", true, "stream_options", map[string]any{"include_usage": true}))
	if strings.Join(st.texts, "|") != strings.Join(a.texts, "|") || st.usage.CompletionTokens != 45 {
		t.Fatalf("streamed n=3: %q (usage %+v), want %q", st.texts, st.usage, a.texts)
	}
	if a.texts[0] == a.texts[1] && a.texts[1] == a.texts[2] {
		t.Errorf("three choices are identical: %q", a.texts[0])
	}
	g := complete(t, te.client, te.url, "/v1/completions", greedy("once upon a time", 15))
	if a.texts[0] == g.texts[0] {
		t.Errorf("sampling at 0.8 gave the greedy text")
	}
	pen := complete(t, te.client, te.url, "/v1/completions", with(greedy("once upon a time", 15), "frequency_penalty", 2.0, "presence_penalty", 2.0))
	if pen.texts[0] == g.texts[0] {
		t.Errorf("penalties changed nothing: %q", pen.texts[0])
	}
}

// TestPreemptionResumes runs 16 long requests through a small KV pool:
// requests are preempted and resumed, and every one completes with the
// text it has without pressure.
func TestPreemptionResumes(t *testing.T) {
	small := newTestEngine(t, "max_total_seq_length=384;prefill_chunk_size=64", false, "--prefix-cache-mode", "disable")
	roomy := newTestEngine(t, "", false, "--prefix-cache-mode", "disable")
	ps := prompts(16)
	want := make([]string, len(ps))
	for i, p := range ps {
		want[i] = complete(t, roomy.client, roomy.url, "/v1/completions", greedy(clip(p, 40), 40)).texts[0]
	}
	var wg sync.WaitGroup
	got := make([]result, len(ps))
	for i, p := range ps {
		wg.Go(func() {
			got[i] = complete(goTB{t}, small.client, small.url, "/v1/completions", with(greedy(clip(p, 40), 40), "stream", i%2 == 0))
		})
	}
	wg.Wait()
	for i := range ps {
		if got[i].finish[0] != "length" || got[i].texts[0] != want[i] {
			t.Errorf("request %d: %s %q, want length %q", i, got[i].finish[0], got[i].texts[0], want[i])
		}
	}
	if m := small.waitMetrics(func(Metrics) bool { return true }); m.Preemptions == 0 {
		t.Errorf("no preemption under pressure: %+v", m)
	}
}

// TestPreemptionInDisaggregation checks that in an NVSHMEM world a
// preempted request ends with finish_reason "preempt".
func TestPreemptionInDisaggregation(t *testing.T) {
	checkPreemptsEnd(t, newTestEngine(t, "max_total_seq_length=512;prefill_chunk_size=64", true))
}

// checkPreemptsEnd sends 16 requests at once to te, an engine of an
// NVSHMEM world whose KV holds few of them, each with the fields of
// extra, and wants some to end "preempt" and some "length", each with
// its usage.
func checkPreemptsEnd(t *testing.T, te *testEngine, extra ...any) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	reasons := map[string]int{}
	for i, p := range prompts(16) {
		wg.Go(func() {
			req := with(greedy(clip(p, 60), 80), extra...)
			if i%2 == 0 {
				req = with(req, "stream", true, "stream_options", map[string]any{"include_usage": true})
			}
			r := complete(goTB{t}, te.client, te.url, "/v1/completions", req)
			if r.usage == nil {
				t.Errorf("request %d: no usage", i)
			}
			mu.Lock()
			reasons[r.finish[0]]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if reasons["preempt"] == 0 || reasons["length"] == 0 {
		t.Fatalf("finish reasons %v, want some preempt and some length", reasons)
	}
}

// TestPreemptionSparesTheOldestArrival: in an NVSHMEM world, a request
// the router resumes after a preemption comes back with its first
// arrival (caddy-mlc's "arrival"), older than the requests running. Sent
// last, onto an engine whose KV the others already overflow, it is not
// the one preempted (MLC's engine preempts the most recently admitted,
// which it would be): it goes ahead of later arrivals and runs to its
// end, and so the oldest request always progresses.
func TestPreemptionSparesTheOldestArrival(t *testing.T) {
	// Four requests start, each growing to 15 of the 32 pages: they
	// overflow the KV cache about a second in (steps of 10 ms), when the
	// old one, sent once they run, is the one admitted last.
	te := newTestEngine(t, "max_total_seq_length=512;prefill_chunk_size=64", true, "--decode-delay", "10ms")
	var wg sync.WaitGroup
	for i, p := range prompts(4) {
		wg.Go(func() {
			complete(goTB{t}, te.client, te.url, "/v1/completions", with(greedy(clip(p, 40), 200), "arrival", 1000+i))
		})
	}
	te.waitMetrics(func(m Metrics) bool { return m.Running == 4 })
	old := complete(t, te.client, te.url, "/v1/completions", with(greedy("an old request resumed with its first arrival", 200), "arrival", 1))
	wg.Wait()
	if old.finish[0] != "length" {
		t.Errorf("the oldest arrival finished %q, want length: it was preempted", old.finish[0])
	}
	if m := te.waitMetrics(func(Metrics) bool { return true }); m.Preemptions == 0 {
		t.Errorf("no preemption: the KV was not under pressure, the test tested nothing")
	}
}

// clip keeps the first n words of s.
func clip(s string, n int) string {
	w := strings.Fields(s)
	return strings.Join(w[:min(n, len(w))], " ")
}

func TestClientDisconnectFreesPages(t *testing.T) {
	te := newTestEngine(t, "", false, "--prefix-cache-mode", "disable")
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, te.url+"/v1/completions",
			strings.NewReader(fmt.Sprintf(`{"prompt":"the end of the world","max_tokens":16000,"temperature":0,"debug_config":{"ignore_eos":true},"stream":%v}`, stream)))
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := te.client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // until the cancel
				resp.Body.Close()
			}
		}()
		te.waitMetrics(func(m Metrics) bool { return m.DecodeTokens > 0 && m.Pages.Used > 0 })
		cancel()
		<-done
		te.waitMetrics(func(m Metrics) bool { return m.Running == 0 && m.Pages.Used == 0 })
	}
}

func TestMetrics(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=1024", false)
	complete(t, te.client, te.url, "/v1/completions", greedy("the sun", 5))
	r := complete(t, te.client, te.url, "/v1/completions", map[string]any{"prompt": "x", "debug_config": map[string]any{"special_request": "query_engine_metrics"}})
	if len(r.texts) != 0 {
		t.Fatalf("metrics completion has choices %q", r.texts)
	}
	if extraInt(t, r.usage, "kv_pages_total") != 64 || extraInt(t, r.usage, "kv_pages_used") != 0 || extraInt(t, r.usage, "running") != 0 {
		t.Fatalf("metrics extra %s", r.usage.Extra)
	}
	// GET /metrics parses as the Prometheus text format and says the same.
	want := `
# HELP mlc_engine_running_requests Sequences being prefilled or decoded.
# TYPE mlc_engine_running_requests gauge
mlc_engine_running_requests 0
# HELP mlc_engine_waiting_requests Sequences waiting to be scheduled.
# TYPE mlc_engine_waiting_requests gauge
mlc_engine_waiting_requests 0
# HELP mlc_engine_blocked_requests Sequences and prep_recvs the last scheduler step could not start, short of KV pages or a batch slot.
# TYPE mlc_engine_blocked_requests gauge
mlc_engine_blocked_requests 0
# HELP mlc_engine_prepared_requests prep_recv reservations waiting for start_generate.
# TYPE mlc_engine_prepared_requests gauge
mlc_engine_prepared_requests 0
# HELP mlc_engine_kv_pages KV cache pages by state (cached: held only by the prefix cache).
# TYPE mlc_engine_kv_pages gauge
mlc_engine_kv_pages{state="used"} 0
mlc_engine_kv_pages{state="cached"} %d
mlc_engine_kv_pages{state="free"} %d
# HELP mlc_engine_kv_pages_total KV cache pages in all.
# TYPE mlc_engine_kv_pages_total gauge
mlc_engine_kv_pages_total 64
# HELP mlc_engine_preemptions_total Sequences preempted for lack of KV pages.
# TYPE mlc_engine_preemptions_total counter
mlc_engine_preemptions_total 0
# HELP mlc_engine_prefill_tokens_total Prompt tokens computed.
# TYPE mlc_engine_prefill_tokens_total counter
mlc_engine_prefill_tokens_total %d
# HELP mlc_engine_decode_tokens_total Tokens decoded.
# TYPE mlc_engine_decode_tokens_total counter
mlc_engine_decode_tokens_total 4
# HELP mlc_engine_prefix_reused_tokens_total Prompt tokens of answered requests taken from the prefix cache.
# TYPE mlc_engine_prefix_reused_tokens_total counter
mlc_engine_prefix_reused_tokens_total %d
# HELP mlc_engine_grammar_cache_bytes Bytes of the grammar cache: token masks (part mask) and the vocabulary trie (part vocab).
# TYPE mlc_engine_grammar_cache_bytes gauge
mlc_engine_grammar_cache_bytes{part="mask"} 0
mlc_engine_grammar_cache_bytes{part="vocab"} 0
# HELP mlc_engine_grammar_cache_grammars Response formats compiled and cached.
# TYPE mlc_engine_grammar_cache_grammars gauge
mlc_engine_grammar_cache_grammars 0
# HELP mlc_engine_grammar_cache_states Automaton states the cached grammars hold.
# TYPE mlc_engine_grammar_cache_states gauge
mlc_engine_grammar_cache_states 0
# HELP mlc_engine_grammar_compile_seconds_total CPU time compiling response formats.
# TYPE mlc_engine_grammar_compile_seconds_total counter
mlc_engine_grammar_compile_seconds_total 0
# HELP mlc_engine_grammar_mask_seconds_total CPU time computing token masks.
# TYPE mlc_engine_grammar_mask_seconds_total counter
mlc_engine_grammar_mask_seconds_total 0
# HELP mlc_engine_grammar_masks_computed_total Token masks computed (each once per grammar state while cached).
# TYPE mlc_engine_grammar_masks_computed_total counter
mlc_engine_grammar_masks_computed_total 0
# HELP mlc_engine_grammar_masks_degraded_total Token masks past jsongrammar.MaxMaskSteps, which admit the tokens of one byte only.
# TYPE mlc_engine_grammar_masks_degraded_total counter
mlc_engine_grammar_masks_degraded_total 0
`
	cached, free, prefill := extraInt(t, r.usage, "kv_pages_cached"), extraInt(t, r.usage, "kv_pages_free"), extraInt(t, r.usage, "prefill_tokens")
	reused := extraInt(t, r.usage, "prefix_reused_tokens")
	if cached+free != 64 || prefill == 0 {
		t.Fatalf("metrics extra %s", r.usage.Extra)
	}
	if err := testutil.ScrapeAndCompare(te.url+"/metrics", strings.NewReader(fmt.Sprintf(want, cached, free, prefill, reused))); err != nil {
		t.Fatal(err)
	}
	// Reserved pages show as used.
	prepRecv(t, te, "m", tiny.New().Encode(strings.Repeat(" the sun", 20)), -1)
	if err := testutil.ScrapeAndCompare(te.url+"/metrics", strings.NewReader(`
# HELP mlc_engine_prepared_requests prep_recv reservations waiting for start_generate.
# TYPE mlc_engine_prepared_requests gauge
mlc_engine_prepared_requests 1
`), "mlc_engine_prepared_requests"); err != nil {
		t.Fatal(err)
	}
	if !release(t, te, "m") {
		t.Fatal("release answered released: false")
	}
}

// TestDebugConfigNeedsEnableDebug checks that without --enable-debug the
// engine ignores debug_config and refuses microserving.
func TestDebugConfigNeedsEnableDebug(t *testing.T) {
	te := newTestEngine(t, "", false, "--enable-debug=false")
	r := complete(t, te.client, te.url, "/v1/completions", with(greedy("the sun", 3), "debug_config", map[string]any{"special_request": "query_engine_metrics"}))
	if len(r.texts) != 1 || r.usage.CompletionTokens != 3 {
		t.Fatalf("debug_config honoured without --enable-debug: %+v", r)
	}
	status, body := post(t, te.client, te.url+"/microserving/prep_recv", map[string]any{"prompt": "a b", "end": -1, "user": "u"})
	if status != http.StatusBadRequest {
		t.Fatalf("prep_recv without --enable-debug: %d %s", status, body)
	}
}

// TestResumeFromDeliveredText checks what a router relies on after a
// preemption: prompt text + delivered text, re-encoded, continues exactly.
func TestResumeFromDeliveredText(t *testing.T) {
	te := newTestEngine(t, "", false)
	tok := tiny.New()
	for i, p := range prompts(6) {
		p = clip(p, 30)
		whole := complete(t, te.client, te.url, "/v1/completions", greedy(p, 24)).texts[0]
		ids := tok.Encode(whole)
		k := 3 + i*3
		delivered := tok.Decode(ids[:k])
		rest := complete(t, te.client, te.url, "/v1/completions", greedy(p+delivered, 24-k)).texts[0]
		if delivered+rest != whole {
			t.Fatalf("prompt %d: resumed after %d tokens: %q + %q, want %q", i, k, delivered, rest, whole)
		}
	}
}
