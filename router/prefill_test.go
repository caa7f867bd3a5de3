package router

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// longPromptIDs is a prompt of n token ids of the tiny model.
func longPromptIDs(n int) []int {
	words := tiny.New().Encode("the slow river carries the boats to the sea while people watch from the bank ")
	var ids []int
	for len(ids) < n {
		ids = append(ids, words...)
	}
	return ids[:n]
}

// retriesNow is caddy_mlc_retries_total for each cause of causes.
func retriesNow(causes ...string) []float64 {
	out := make([]float64, len(causes))
	for i, c := range causes {
		out[i] = testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(c))
	}
	return out
}

// retriedSince is how many retries of each cause came since before.
func retriedSince(before []float64, causes ...string) []float64 {
	now := retriesNow(causes...)
	for i := range now {
		now[i] -= before[i]
	}
	return now
}

// postStream posts a streamed completion to the router and returns the
// status, the raw answer and the text streamed.
func postStream(t *testing.T, base string, body map[string]any) (int, string, string) {
	t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(base+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var text strings.Builder
	for line := range strings.SplitSeq(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk protocol.CompletionResponse
		if json.Unmarshal([]byte(data), &chunk) == nil {
			for _, ch := range chunk.Choices {
				text.WriteString(ch.Text)
			}
		}
	}
	return resp.StatusCode, string(raw), text.String()
}

// A prompt whose prefill takes longer than the engine timeout is
// answered, exactly, in one attempt: the engine working on it was not
// taken for a stalled one.
func TestLongPrefillIsWork(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: 300}, nil)
	// 1.5 s of prefill, and its compute: past the engine timeout.
	answeredInOneAttempt(t, c, time.Millisecond, 1500*time.Millisecond)
}

// A prefill far longer than predicted, on an engine whose metrics show it
// prefilling (its engine_prefill_time_sum grows chunk after chunk), is
// work however long it takes: answered exactly in one attempt, where an
// engine that shows nothing has its call retried and then refused (see
// TestPrefillOverrun), as a host slower than the latency model learnt
// (CI's, shared with other work) had Codex's first request refused.
func TestSlowPrefillThatProgressesIsWork(t *testing.T) {
	// The engine timeout leaves a chunk five times its time between two
	// signs of progress: on a loaded machine a 0.2 s chunk may take
	// twice that, and the test is about a prefill that shows progress.
	c := startCoreArgs(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: 1e6}, nil,
		"--overrides", "prefill_chunk_size=100")
	// 15 chunks of 0.2 s: 3 s, three engine timeouts, far past the
	// allowance.
	answeredInOneAttempt(t, c, 2*time.Millisecond, 3*time.Second)
}

// answeredInOneAttempt streams a 1,500-token prompt through c's router,
// its engine slowed by perToken of prefill, and checks that the answer
// is the unslowed one, took at least atLeast (else the test proved
// nothing), and was neither retried nor resumed.
func answeredInOneAttempt(t *testing.T, c *core, perToken, atLeast time.Duration) {
	t.Helper()
	prompt := longPromptIDs(1500)
	want := c.complete(c.base, greedy(prompt, 8))
	slow(t, c.engines[0], perToken, 0)
	causes := []string{causeTimeout, causePrefill, causeFailure}
	before := retriesNow(causes...)
	t0 := time.Now()
	status, raw, text := postStream(t, c.base, greedy(prompt, 8))
	took := time.Since(t0)
	if status != http.StatusOK || text != want || !strings.Contains(raw, "[DONE]") {
		t.Fatalf("status %d, text %q, want %q: %s", status, text, want, raw)
	}
	if took < atLeast {
		t.Errorf("the prefill took %v, under %v: the test proves nothing", took, atLeast)
	}
	if d := retriedSince(before, causes...); d[0]+d[1]+d[2] != 0 {
		t.Errorf("retries (timeout, prefill, failure) %v: want none", d)
	}
	t.Logf("a %v prefill answered in one attempt", took.Round(time.Millisecond))
}

// A prompt no engine is predicted to prefill within max_prefill_time is
// refused up front, naming its tokens and the limit.
func TestPrefillTooLongRefused(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, PrefillRate: 100, MaxPrefillTime: time.Second}, nil)
	status, raw, _ := postStream(t, c.base, greedy(longPromptIDs(500), 4))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(raw, "prompt_too_long") ||
		!strings.Contains(raw, "500 tokens") || !strings.Contains(raw, "max_prefill_time of 1s") {
		t.Fatalf("status %d: %s; want 413 prompt_too_long naming 500 tokens and 1s", status, raw)
	}
	if status, raw, _ := postStream(t, c.base, greedy(longPromptIDs(50), 4)); status != http.StatusOK {
		t.Errorf("a prompt within the bound: %d %s", status, raw)
	}
}

// A frozen engine (SIGSTOP) is still caught while a long prompt waits
// on it: its probes go unanswered, and the request resumes on the other
// engine once the engine timeout passes (not the prefill's allowance),
// answered exactly.
func TestPrefillFrozenEngine(t *testing.T) {
	const engineTimeout = time.Second
	c := startCore(t, 2, Config{Mode: ModeWhole, EngineTimeout: engineTimeout, PrefillRate: 100}, nil)
	prompt := longPromptIDs(1500)
	want := c.complete(c.base, greedy(prompt, 8))
	for _, e := range c.engines {
		slow(t, e, time.Millisecond, 0)
	}
	t0 := time.Now()
	if _, _, text := postStream(t, c.base, greedy(prompt, 8)); text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	alone := time.Since(t0)

	before := retriesNow(causeTimeout, causePrefill)
	type answer struct {
		status int
		raw    string
		text   string
	}
	done := make(chan answer, 1)
	go func() {
		s, raw, text := postStream(t, c.base, greedy(prompt, 8))
		done <- answer{s, raw, text}
	}()
	var pid int
	deadline := time.Now().Add(time.Minute)
	for pid == 0 {
		for _, u := range c.r.candidates("") {
			if u.inflight.Load() > 0 {
				pid = c.fleet.PID(u.index)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the request reached no engine")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	a := <-done
	took := time.Since(frozen)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if a.status != http.StatusOK || a.text != want {
		t.Fatalf("status %d, text %q, want %q: %s", a.status, a.text, want, a.raw)
	}
	if d := retriedSince(before, causeTimeout, causePrefill); d[0] != 1 || d[1] != 0 {
		t.Errorf("retries (timeout, prefill) %v: want 1 0", d)
	}
	// The retry's cause proves the freeze was caught as silence; the time
	// only shows it was not waited out: under the prefill's allowance
	// (1,500 tokens at prefill_rate 100, 15 s), with room for a loaded
	// machine.
	if bound := 3*(engineTimeout+alone) + 5*time.Second; took > bound {
		t.Errorf("answered %v after the freeze, above %v (thrice the engine timeout and %v for the prefill alone, and 5 s)", took, bound, alone)
	}
	t.Logf("answered %v after the freeze (%v alone)", took.Round(time.Millisecond), alone.Round(time.Millisecond))
}

// randomPromptIDs is a prompt of n token ids of the tiny model, the same
// for the same seed and unlike any other seed's from its first token.
func randomPromptIDs(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 39))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 3 + r.IntN(1200)
	}
	return ids
}

// The prefill time a prompt is allowed, and refused beyond, counts only
// the tokens the engine's prefix cache is not expected to hold: a prompt
// that extends one the engine has computed is served where the same
// number of new tokens is refused, and its call's allowance is that of
// its new tokens.
func TestPrefillCountsUncachedTokens(t *testing.T) {
	const rate = 1000.0
	c := startCore(t, 1, Config{Mode: ModeWhole, EngineTimeout: time.Second, PrefillRate: rate, MaxPrefillTime: time.Second,
		PrefixCache: engine.PrefixCacheRadix}, PrefixAware{})
	head := randomPromptIDs(1, 900) // 0.9 s at the rate: within the bound
	if status, raw, _ := postStream(t, c.base, greedy(head, 4)); status != http.StatusOK {
		t.Fatalf("the head alone: %d %s", status, raw)
	}
	longer := append(slices.Clone(head), randomPromptIDs(2, 400)...) // 1.3 s, 0.4 s of it new
	if status, raw, _ := postStream(t, c.base, greedy(longer, 4)); status != http.StatusOK {
		t.Errorf("the head and 400 tokens more: %d %s; want 200 (the engine holds the head)", status, raw)
	}
	other := randomPromptIDs(3, len(longer))
	status, raw, _ := postStream(t, c.base, greedy(other, 4))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(raw, "1300 tokens would") {
		t.Errorf("a new prompt of 1300 tokens: %d %s; want 413 naming its 1300 tokens", status, raw)
	}

	// The allowance of a call on the engine: its uncached tokens at the rate.
	q := &Request{Prompt: append(slices.Clone(longer), randomPromptIDs(4, 100)...)}
	l, err := c.r.acquire(t.Context(), "", pickOptions{req: q})
	if err != nil {
		t.Fatal(err)
	}
	defer l.release(nil)
	l.routed()
	held := len(longer) / kvPageTokens * kvPageTokens
	if got, want := l.uncached(len(q.Prompt)), len(q.Prompt)-held; got != want {
		t.Errorf("uncached %d of %d tokens, want %d (the engine holds %d)", got, len(q.Prompt), want, held)
	}
	plan := prefillOf(c.r.planPrefill(t.Context(), l.Upstream, false, l.uncached(len(q.Prompt))))
	if want := time.Duration(float64(len(q.Prompt)-held) / rate * float64(time.Second)); plan.allow != want {
		t.Errorf("allowance %v, want %v for the %d uncached tokens", plan.allow, want, len(q.Prompt)-held)
	}
}

// Where the router keeps the engines' latency models (slo_aware) and
// they are fitted, a prefill's predicted time is theirs, not the
// configured rate's: a prompt the rate says is too long to prefill
// within max_prefill_time is refused before the model knows the engine,
// and served once it does.
func TestPrefillTimeFromTheLatencyModel(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, PrefillRate: 100, MaxPrefillTime: 2 * time.Second}, SLOAware{})
	prompt := randomPromptIDs(9, 400) // 4 s at the rate
	if status, raw, _ := postStream(t, c.base, greedy(prompt, 4)); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("before the model has data: %d %s; want 413 by the rate", status, raw)
	}
	for i := range 16 {
		if status, raw, _ := postStream(t, c.base, greedy(randomPromptIDs(uint64(20+i), 20+10*i), 4)); status != http.StatusOK {
			t.Fatalf("a prompt of %d tokens: %d %s", 20+10*i, status, raw)
		}
	}
	u := c.r.candidates("")[0]
	_, idle, _ := predictFleet([]*Upstream{u}, len(prompt))
	if idle <= 0 || idle > 2*time.Second {
		t.Fatalf("the fitted model predicts %v for %d tokens: the test needs it within max_prefill_time", idle, len(prompt))
	}
	if status, raw, _ := postStream(t, c.base, greedy(prompt, 4)); status != http.StatusOK {
		t.Errorf("with the model predicting %v: %d %s; want 200", idle, status, raw)
	}
}
