package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// wakeDeadline bounds how long a test waits for queued work that must run
// without any outside event; it is generous, so that only a stall fails.
const wakeDeadline = 30 * time.Second

// TestQueuedPrepRecvRunsWhenGenerationEnds is the reported stall: on an
// engine of 16 pages, a 240-token generation runs while a prep_recv for
// 240 tokens waits behind it. When the generation ends, the prep_recv must
// be served at once, though nothing else reaches the engine: the test
// stops polling its metrics once the prep_recv is queued.
func TestQueuedPrepRecvRunsWhenGenerationEnds(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	ids := tiny.New().Encode(strings.Repeat(" the sun", 120)) // 240 tokens: 15 pages for [0, 239)
	for attempt := 1; ; attempt++ {
		gen := make(chan result, 1)
		go func() {
			req := with(greedy(" the", 239), "debug_config", map[string]any{"ignore_eos": true})
			gen <- complete(goTB{t}, te.client, te.url, protocol.PathCompletions, req)
		}()
		te.waitMetrics(func(m Metrics) bool { return m.Running == 1 })
		prep := make(chan protocol.PrepRecvResponse, 1)
		go func() { prep <- prepRecv(goTB{t}, te, "late", ids, -1) }()
		queued := te.pollUntil(prep, func(m Metrics) bool { return m.Waiting == 1 && m.Running == 1 })
		// From here on nothing but the two answers is awaited.
		select {
		case <-prep:
		case <-time.After(wakeDeadline):
			t.Fatalf("prep_recv still waits %v after it was queued behind a generation of 240 tokens", wakeDeadline)
		}
		if r := <-gen; r.finish[0] != "length" || r.usage.CompletionTokens != 239 {
			t.Fatalf("generation: %v %+v", r.finish, r.usage)
		}
		consume(t, te, "late", ids)
		if queued {
			return
		}
		if attempt == 5 {
			t.Fatal("the generation ended before the prep_recv was queued, 5 times")
		}
	}
}

// pollUntil polls the engine's metrics until cond holds, reporting true,
// or until done delivers (the awaited answer came first), reporting false;
// what done delivered is put back.
func (te *testEngine) pollUntil(done chan protocol.PrepRecvResponse, cond func(Metrics) bool) bool {
	te.t.Helper()
	deadline := time.Now().Add(wakeDeadline)
	for time.Now().Before(deadline) {
		select {
		case v := <-done:
			done <- v
			return false
		default:
		}
		m, err := te.e.Metrics()
		if err != nil {
			te.t.Fatal(err)
		}
		if cond(m) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	te.t.Fatal("the engine never reached the awaited state")
	return false
}

// consume runs a one-token start_generate on user's reservation, which
// frees it.
func consume(t testing.TB, te *testEngine, user string, ids []int) {
	t.Helper()
	r := complete(t, te.client, te.url, protocol.PathStartGenerate, with(greedy(ids, 1), "begin", 0, "user", user))
	if r.finish[0] != "length" {
		t.Fatalf("start_generate on %q's reservation: %v", user, r.finish)
	}
}
