package builtin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// router runs MLC's disaggregated flow over a prefill and a decode engine.
type router struct {
	t                 testing.TB
	client            *http.Client
	prefill, decode   string // base URLs
	decodeRank        int
	lastMatched       int
	lastSent, lastEnd int
	// kvBytes is the KV a position transfers; 0: the tiny model's (2
	// layers, keys and values, 64 float32 each).
	kvBytes int64
}

// prepRecv calls prep_recv and returns its answer.
func (r *router) prepRecv(user string, ids []int, end int) protocol.PrepRecvResponse {
	r.t.Helper()
	status, body := post(r.t, r.client, r.decode+protocol.PathPrepRecv, map[string]any{"prompt": ids, "end": end, "user": user, "temperature": 0})
	if status != http.StatusOK {
		r.t.Fatalf("prep_recv: %d %s", status, body)
	}
	var res protocol.PrepRecvResponse
	if err := json.Unmarshal(body, &res); err != nil {
		r.t.Fatal(err)
	}
	return res
}

// run generates for prompt with the given pd_balance_factor.
func (r *router) run(user, prompt string, factor float64, extra map[string]any) result {
	r.t.Helper()
	ids := tiny.New().Encode(prompt)
	end := -1
	if factor > 1e-5 {
		end = int((1 - factor) * float64(len(ids)))
	}
	prep := r.prepRecv(user, ids, end)
	end = protocol.ResolveIndex(end, len(ids))
	if prep.PrefixMatchedLength > end {
		r.t.Fatalf("prefix_matched_length %d > end %d", prep.PrefixMatchedLength, end)
	}
	r.lastMatched, r.lastEnd, r.lastSent = prep.PrefixMatchedLength, end, 0
	if prep.PrefixMatchedLength < end {
		status, body := post(r.t, r.client, r.prefill+protocol.PathRemoteSend, map[string]any{
			"prompt": ids, "begin": prep.PrefixMatchedLength, "end": end, "kv_addr_info": prep.KVAppendMetadata,
			"recv_rank": r.decodeRank, "user": user, "temperature": 0,
		})
		var ack protocol.RemoteSendResponse
		if status != http.StatusOK || json.Unmarshal(body, &ack) != nil {
			r.t.Fatalf("remote_send: %d %s", status, body)
		}
		perPosition := r.kvBytes
		if perPosition == 0 {
			perPosition = 2 * 2 * 64 * 4
		}
		if want := int64(end-prep.PrefixMatchedLength) * perPosition; ack.KVBytes != want {
			r.t.Fatalf("remote_send moved %d KV bytes, want %d", ack.KVBytes, want)
		}
		r.lastSent = end - prep.PrefixMatchedLength
	}
	req := with(extra, "prompt", ids, "begin", end, "user", user)
	return complete(r.t, r.client, r.decode, protocol.PathStartGenerate, req)
}

// TestMicroservingExact checks that prep_recv, remote_send and
// start_generate across two engine processes give exactly the text of one
// engine's /v1/completions, for 50+ prompts, every pd_balance_factor of
// {0, 0.3, 0.7}, streamed and not. Both engines prefill in chunks of 13
// tokens, so chunk edges fall everywhere relative to the split.
func TestMicroservingExact(t *testing.T) {
	procs := startWorld(t, 2, "--overrides", "prefill_chunk_size=13")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var sent, matched atomic.Int64
	jobs := make(chan int, 52)
	var wg sync.WaitGroup
	for i := range 52 {
		jobs <- i
	}
	close(jobs)
	for range 3 {
		wg.Go(func() {
			r := &router{t: goTB{t}, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1}
			for i := range jobs {
				s, m := r.checkPrompt(i, clip(prompts(52)[i], 1+i*5%90))
				sent.Add(s)
				matched.Add(m)
			}
		})
	}
	wg.Wait()
	if sent.Load() < 50 || matched.Load() < 50 {
		t.Errorf("only %d runs transferred KV and %d matched a cached prefix", sent.Load(), matched.Load())
	}
}

// checkPrompt compares the disaggregated flow with /v1/completions for one
// prompt, every factor, streamed and not; it counts the runs that
// transferred KV and that matched a cached prefix.
func (r *router) checkPrompt(i int, p string) (sent, matched int64) {
	want := complete(r.t, r.client, r.prefill, protocol.PathCompletions, greedy(p, 8))
	for _, f := range []float64{0, 0.3, 0.7} {
		for _, stream := range []bool{false, true} {
			user := fmt.Sprintf("req-%d-%v-%v", i, f, stream)
			got := r.run(user, p, f, with(greedy(nil, 8), "stream", stream))
			if got.texts[0] != want.texts[0] || got.finish[0] != want.finish[0] {
				r.t.Fatalf("prompt %d (%d words) factor %v stream %v: got %q (%s), want %q (%s)",
					i, len(strings.Fields(p)), f, stream, got.texts[0], got.finish[0], want.texts[0], want.finish[0])
			}
			if r.lastSent > 0 {
				sent++
			}
			if r.lastMatched > 0 {
				matched++
			}
		}
	}
	return sent, matched
}

// TestMicroservingBadInputs checks the 400 answers, and that a rejected
// transfer writes nothing: the same request then completes exactly.
func TestMicroservingBadInputs(t *testing.T) {
	procs := startWorld(t, 2, "--prefix-cache-mode", "disable")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	r := &router{t: t, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1}
	prompt := clip(prompts(30)[20], 60)
	ids := tiny.New().Encode(prompt)
	want := complete(t, c, procs[0].url(""), protocol.PathCompletions, greedy(ids, 8))
	end := len(ids) - 1
	prep := r.prepRecv("bad", ids, -1)
	meta, _ := protocol.DecodeKVAppendMetadata(prep.KVAppendMetadata, 1)
	shifted := protocol.KVAppendMetadata{{{Start: meta[0][0].Start + 16, Length: end}}}
	send := func(kv ...any) map[string]any {
		return with(map[string]any{"prompt": ids, "begin": 0, "end": end, "kv_addr_info": prep.KVAppendMetadata, "recv_rank": 1, "user": "bad"}, kv...)
	}
	cases := []struct {
		name string
		url  string
		body map[string]any
	}{
		{"metadata not base64", procs[0].url(protocol.PathRemoteSend), send("kv_addr_info", "!!!")},
		{"metadata of the wrong shape", procs[0].url(protocol.PathRemoteSend), send("kv_addr_info", protocol.KVAppendMetadata{{{Start: 0, Length: end}}, {}}.Encode())},
		{"rank outside the world", procs[0].url(protocol.PathRemoteSend), send("recv_rank", 2)},
		{"negative rank", procs[0].url(protocol.PathRemoteSend), send("recv_rank", -1)},
		{"window outside the prompt", procs[0].url(protocol.PathRemoteSend), send("end", len(ids)+5)},
		{"begin after end", procs[0].url(protocol.PathRemoteSend), send("begin", end, "end", 2)},
		{"segment length mismatch", procs[0].url(protocol.PathRemoteSend), send("begin", 1)},
		{"slots not reserved", procs[0].url(protocol.PathRemoteSend), send("kv_addr_info", shifted.Encode())},
		{"another user's slots", procs[0].url(protocol.PathRemoteSend), send("user", "other")},
		{"no user", procs[0].url(protocol.PathRemoteSend), send("user", "")},
		{"start before the KV arrived", procs[1].url(protocol.PathStartGenerate), map[string]any{"prompt": ids, "begin": end, "user": "bad"}},
		{"start without prep_recv", procs[1].url(protocol.PathStartGenerate), map[string]any{"prompt": ids, "begin": 3, "user": "nobody"}},
		{"start with another prompt", procs[1].url(protocol.PathStartGenerate), map[string]any{"prompt": ids[1:], "begin": 0, "user": "bad"}},
		{"prep_recv end outside", procs[1].url(protocol.PathPrepRecv), map[string]any{"prompt": ids, "end": len(ids) + 1, "user": "x"}},
		{"prep_recv without user", procs[1].url(protocol.PathPrepRecv), map[string]any{"prompt": ids, "end": -1}},
		{"token outside the vocabulary", procs[1].url(protocol.PathCompletions), map[string]any{"prompt": []int{1, 99999}}},
		{"empty prompt", procs[1].url(protocol.PathCompletions), map[string]any{"prompt": ""}},
		{"bad temperature", procs[1].url(protocol.PathCompletions), map[string]any{"prompt": "a", "temperature": -1}},
		{"bad logit_bias", procs[1].url(protocol.PathCompletions), map[string]any{"prompt": "a", "logit_bias": map[string]float64{"100000": 1}}},
	}
	for _, tc := range cases {
		status, body := post(t, c, tc.url, tc.body)
		if status != http.StatusBadRequest || protocol.ParseError(status, body) == nil {
			t.Errorf("%s: status %d %s, want 400 with an error body", tc.name, status, body)
		}
	}
	// Python-style negative window indices: [-len, -1) is [0, len-1).
	status, body := post(t, c, procs[0].url(protocol.PathRemoteSend), send("begin", -len(ids), "end", -1))
	if status != http.StatusOK {
		t.Fatalf("remote_send after the rejected ones: %d %s", status, body)
	}
	got := complete(t, c, procs[1].url(""), protocol.PathStartGenerate, map[string]any{"prompt": ids, "begin": end, "user": "bad", "max_tokens": 8, "temperature": 0})
	if got.texts[0] != want.texts[0] {
		t.Fatalf("after rejected transfers: %q, want %q", got.texts[0], want.texts[0])
	}
	resp, err := c.Get(procs[1].url("/no/such/path"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
}

// TestMicroservingPreemptRetry runs 16 concurrent disaggregated requests
// against a decode engine with a small KV pool: some are preempted (finish
// reason "preempt"), and a router that retries them from prep_recv gets
// exactly the unpressured text for every one.
func TestMicroservingPreemptRetry(t *testing.T) {
	procs := startWorld(t, 2, "--overrides", "max_total_seq_length=640;prefill_chunk_size=64")
	c := &http.Client{}
	defer c.CloseIdleConnections()
	ps := prompts(16)
	want := make([]string, len(ps))
	for i, p := range ps {
		want[i] = complete(t, c, procs[0].url(""), protocol.PathCompletions, greedy(clip(p, 50), 60)).texts[0]
	}
	var wg sync.WaitGroup
	var preempts atomic.Int64
	for i, p := range ps {
		wg.Go(func() {
			r := &router{t: goTB{t}, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1}
			for range 50 {
				got := r.run(fmt.Sprintf("p%d", i), clip(p, 50), []float64{0, 0.3, 0.7}[i%3], with(greedy(nil, 60), "stream", i%2 == 0))
				if got.finish[0] == "preempt" {
					preempts.Add(1)
					continue
				}
				if got.texts[0] != want[i] || got.finish[0] != "length" {
					t.Errorf("request %d: %s %q, want %q", i, got.finish[0], got.texts[0], want[i])
				}
				return
			}
			t.Errorf("request %d: preempted 50 times", i)
		})
	}
	wg.Wait()
	if preempts.Load() == 0 {
		t.Error("no request was preempted")
	}
	t.Logf("%d preemptions", preempts.Load())
}

// TestRemoteSendOfACachedWindow checks that a remote_send whose whole
// window the prefill engine's prefix cache holds (the same prompt asked
// again, as a retried or resumed request is) answers at once, with the
// text start_generate then gives that of one engine: it computes nothing,
// and must still finish.
func TestRemoteSendOfACachedWindow(t *testing.T) {
	procs := startWorld(t, 2)
	c := &http.Client{Timeout: time.Minute}
	defer c.CloseIdleConnections()
	r := &router{t: t, client: c, prefill: procs[0].url(""), decode: procs[1].url(""), decodeRank: 1}
	ids := tiny.New().Encode(clip(prompts(3)[2], 60))
	end := len(ids) / kvcache.PageSize * kvcache.PageSize
	if end == 0 || end == len(ids) {
		t.Fatalf("a prompt of %d tokens has no whole page short of its end", len(ids))
	}
	// The prefill engine's cache takes the prompt's full pages.
	want := complete(t, c, r.prefill, protocol.PathCompletions, greedy(ids, 8))
	prep := r.prepRecv("cached-window", ids, end)
	if prep.PrefixMatchedLength != 0 {
		t.Fatalf("the decode engine matched %d tokens of a prompt it never saw", prep.PrefixMatchedLength)
	}
	status, body := post(t, c, r.prefill+protocol.PathRemoteSend, map[string]any{
		"prompt": ids, "begin": 0, "end": end, "kv_addr_info": prep.KVAppendMetadata,
		"recv_rank": r.decodeRank, "user": "cached-window", "temperature": 0,
	})
	if status != http.StatusOK {
		t.Fatalf("remote_send of a cached window: %d %s", status, body)
	}
	got := complete(t, c, r.decode, protocol.PathStartGenerate, with(greedy(ids, 8), "begin", end, "user", "cached-window"))
	if got.texts[0] != want.texts[0] {
		t.Errorf("after a cached remote_send: %q, one engine: %q", got.texts[0], want.texts[0])
	}
}
