package builtin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// fast is the flags of a timed engine whose modelled time is a
// thousandth of real time: the exactness tests check texts, not clocks.
var fast = []string{"--timing", "h100-llama3-8b", "--time-scale", "0.001"}

// TestTimedEngineIsCheap checks that a timed engine holds no model and no
// KV floats, only the pages' bookkeeping and a word a slot, and sizes its
// cache, chunk and context from its profile.
func TestTimedEngineIsCheap(t *testing.T) {
	te := newTestEngine(t, "", false, fast...)
	p, _ := timing.ByName("h100-llama3-8b")
	if te.e.model != nil || len(te.e.sched.pool.KV.K) != 0 || len(te.e.logits) != 0 {
		t.Fatalf("a timed engine built the model (%v) or KV floats (%d layers)", te.e.model != nil, len(te.e.sched.pool.KV.K))
	}
	if got, want := te.e.sched.pool.Pages(), pagesFor(p.KVTokens()); got != want {
		t.Errorf("%d KV pages, want the profile's %d", got, want)
	}
	if te.e.sched.chunk != timedPrefillChunk || te.e.maxSeq != p.Model.Context {
		t.Errorf("chunk %d, context %d; want %d and %d", te.e.sched.chunk, te.e.maxSeq, timedPrefillChunk, p.Model.Context)
	}
	if n, err := SequenceLimit([]string{"tiny", "--timing", "h100-llama3-8b"}); err != nil || n != p.Model.Context {
		t.Errorf("SequenceLimit = %d %v, want the profile's context %d", n, err, p.Model.Context)
	}
}

// TestTimedTextIsExact checks that a timed engine's text is a function of
// the context alone, as a model's: the same in one chunk and in chunks of
// 13, with a cached prefix, resumed from the delivered text, under
// preemption, and different for different prompts.
func TestTimedTextIsExact(t *testing.T) {
	whole := newTestEngine(t, "prefill_chunk_size=4096", false, append(fast, "--prefix-cache-mode", "disable")...)
	chunked := newTestEngine(t, "prefill_chunk_size=13", false, fast...)
	small := newTestEngine(t, "max_total_seq_length=384;prefill_chunk_size=64", false, append(fast, "--prefix-cache-mode", "disable")...)
	tok := tiny.New()
	ps := prompts(16)
	want := make([]string, len(ps))
	for i, p := range ps {
		req := with(greedy(clip(p, 40), 40), "debug_config", map[string]any{"ignore_eos": true})
		want[i] = complete(t, whole.client, whole.url, protocol.PathCompletions, req).texts[0]
		for pass := range 2 { // the second pass finds the prompt cached
			if got := complete(t, chunked.client, chunked.url, protocol.PathCompletions, req).texts[0]; got != want[i] {
				t.Fatalf("prompt %d pass %d in chunks of 13: %q, want %q", i, pass, got, want[i])
			}
		}
		ids := tok.Encode(want[i])
		k := 1 + i*2
		delivered := tok.Decode(ids[:k])
		rest := complete(t, whole.client, whole.url, protocol.PathCompletions, with(req, "prompt", clip(p, 40)+delivered, "max_tokens", 40-k)).texts[0]
		if delivered+rest != want[i] {
			t.Fatalf("prompt %d resumed after %d tokens: %q + %q, want %q", i, k, delivered, rest, want[i])
		}
	}
	if want[0] == want[1] || len(tok.Encode(want[0])) != 40 {
		t.Fatalf("the generator does not follow the prompt, or ignore_eos: %q, %q", want[0], want[1])
	}
	var wg sync.WaitGroup
	got := make([]result, len(ps))
	for i, p := range ps {
		wg.Go(func() {
			req := with(greedy(clip(p, 40), 40), "stream", i%2 == 0, "debug_config", map[string]any{"ignore_eos": true})
			got[i] = complete(goTB{t}, small.client, small.url, protocol.PathCompletions, req)
		})
	}
	wg.Wait()
	for i := range ps {
		if got[i].texts[0] != want[i] {
			t.Errorf("request %d under preemption: %q, want %q", i, got[i].texts[0], want[i])
		}
	}
	if m := small.waitMetrics(func(Metrics) bool { return true }); m.Preemptions == 0 {
		t.Errorf("no preemption under pressure: %+v", m)
	}
}

// TestTimedEOS checks that the generator ends texts by itself, about once
// in 256 tokens, and never with --eos-every 0: what a replay through a
// router (which sends engines no ignore_eos) sets lengths with.
func TestTimedEOS(t *testing.T) {
	ends := newTestEngine(t, "", false, fast...)
	never := newTestEngine(t, "", false, append(fast, "--eos-every", "0")...)
	stopped := 0
	for _, p := range prompts(20) {
		if complete(t, ends.client, ends.url, protocol.PathCompletions, greedy(clip(p, 20), 512)).finish[0] == protocol.FinishStop {
			stopped++
		}
		if r := complete(t, never.client, never.url, protocol.PathCompletions, greedy(clip(p, 20), 512)); r.finish[0] != protocol.FinishLength {
			t.Fatalf("--eos-every 0 ended a text with %q", r.finish[0])
		}
	}
	if stopped < 10 {
		t.Errorf("%d of 20 texts of up to 512 tokens ended by themselves; about 17 should", stopped)
	}
}

// TestTimedDisaggregationExact runs MLC's microserving flow between two
// timed engine processes (prep_recv, remote_send of the words, start
// generate) for every split, streamed and not: the text is the prefill
// engine's own, and a preempted request in their world ends with
// finish_reason "preempt".
func TestTimedDisaggregationExact(t *testing.T) {
	procs := startWorld(t, 2, append(fast, "--overrides", "prefill_chunk_size=13")...)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	r := &router{t: t, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1, kvBytes: 8}
	sent := int64(0)
	for i := range 12 {
		s, _ := r.checkPrompt(i, clip(prompts(12)[i], 2+i*7))
		sent += s
	}
	if sent < 10 {
		t.Errorf("only %d runs sent KV", sent)
	}

	te := newTestEngine(t, "max_total_seq_length=512;prefill_chunk_size=64", true, fast...)
	checkPreemptsEnd(t, te, "debug_config", map[string]any{"ignore_eos": true})
}

// TestTimedClockFollowsProfile runs one request at real time (scale 1) and
// checks the clock against the profile: the modelled time the engine
// accounts is exactly the profile's cost of the steps the request takes
// (two prefill chunks of 2048 and 952 tokens, then a decode step a
// token), no token comes out before its step's modelled end, and the
// whole takes its modelled time plus at most a generous bound for the
// CPU (CI's machine is loaded: the 5% figure on an idle machine is the
// bench's, -trace -check).
func TestTimedClockFollowsProfile(t *testing.T) {
	te := newTestEngine(t, "", false, "--timing", "h100-llama3-8b")
	p, _ := timing.ByName("h100-llama3-8b")
	const promptLen, outLen = 3000, 24
	ids := make([]int, promptLen)
	for i := range ids {
		ids[i] = 3 + (i*7919)%1200
	}
	prefill := p.StepTime(timing.Step{Prefill: []timing.Chunk{{New: 2048}}}) +
		p.StepTime(timing.Step{Prefill: []timing.Chunk{{New: promptLen - 2048, Cached: 2048}}, Sampled: 1})
	want := prefill
	for i := 1; i < outLen; i++ {
		want += p.StepTime(timing.Step{Decode: 1, Context: promptLen + i, Sampled: 1})
	}
	req := with(greedy(ids, outLen), "stream", true, "debug_config", map[string]any{"ignore_eos": true})
	t0 := time.Now()
	resp, err := te.client.Post(te.url+protocol.PathCompletions, "application/json", strings.NewReader(jsonOf(t, req)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sr := protocol.NewSSEReader(resp.Body, 0)
	if _, err := sr.Next(); err != nil {
		t.Fatal(err)
	}
	ttft := time.Since(t0)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	m := te.waitMetrics(func(m Metrics) bool { return m.Running == 0 })
	if m.Clock == nil || m.Clock.Busy != want || m.Clock.Steps != 2+outLen-1 {
		t.Fatalf("clock %+v; want %v busy in %d steps", m.Clock, want, 2+outLen-1)
	}
	if ttft < prefill {
		t.Errorf("first token after %v, before the prefill's modelled %v", ttft, prefill)
	}
	if took < want || took > want+3*time.Second {
		t.Errorf("the request took %v; modelled %v", took, want)
	}
	t.Logf("modelled %v (prefill %v), took %v (first token %v); lag %v in all, %v at most", want, prefill, took, ttft, m.Clock.Lag, m.Clock.MaxLag)
}

// TestTimedTransferWaitsForTheLink checks that remote_send takes at least
// the modelled transfer of its window over the engine's link, scaled.
func TestTimedTransferWaitsForTheLink(t *testing.T) {
	procs := startWorld(t, 2, "--timing", "h100-llama3-8b", "--kv-link", "rdma", "--time-scale", "20")
	p, _ := timing.ByName("h100-llama3-8b")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	r := &router{t: t, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1, kvBytes: 8}
	ids := tiny.New().Encode(strings.Repeat(" the sun and the moon", 100))
	prep := r.prepRecv("u", ids, -1)
	end := len(ids) - 1
	transfer := time.Duration(20 * float64(p.TransferTime(end, p.GPU.RDMA)))
	t0 := time.Now()
	status, body := post(t, c, r.prefill+protocol.PathRemoteSend, map[string]any{
		"prompt": ids, "begin": 0, "end": end, "kv_addr_info": prep.KVAppendMetadata, "recv_rank": 1, "user": "u"})
	if took := time.Since(t0); status != http.StatusOK || took < transfer {
		t.Fatalf("remote_send: %d %s after %v; the link alone takes %v", status, body, took, transfer)
	}
	complete(t, c, r.decode, protocol.PathStartGenerate, with(greedy(ids, 2), "begin", end, "user", "u"))
}

// TestTimedRefuses checks what a timed engine answers 400: it computes no
// logits, and its time is its profile's (the flags that do not go with
// --timing are TestParseArgsErrors').
func TestTimedRefuses(t *testing.T) {
	te := newTestEngine(t, "", false, fast...)
	for param, req := range map[string]map[string]any{
		"logprobs":        with(greedy("hello", 2), "logprobs", 2),
		"response_format": with(greedy("hello", 2), "response_format", map[string]any{"type": "json_object"}),
	} {
		status, body := post(t, te.client, te.url+protocol.PathCompletions, req)
		if status != http.StatusBadRequest || !strings.Contains(string(body), codeTimedUnsupported) || !strings.Contains(string(body), param) {
			t.Errorf("%s on a timed engine: %d %s", param, status, body)
		}
	}
	if status, body := post(t, te.client, te.url+protocol.PathSlowness, map[string]any{"decode_delay_us": 1000}); status != http.StatusBadRequest {
		t.Errorf("slowness on a timed engine: %d %s", status, body)
	}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
