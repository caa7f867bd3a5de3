package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
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
	for range 5 {
		gen := make(chan result, 1)
		go func() {
			req := with(greedy(" the", 239), "debug_config", map[string]any{"ignore_eos": true})
			gen <- complete(goTB{t}, te.client, te.url, protocol.PathCompletions, req)
		}()
		if !pollUntil(te, gen, func(m Metrics) bool { return m.Running == 1 }) {
			<-gen // it ended before it was seen running: again
			continue
		}
		prep := make(chan protocol.PrepRecvResponse, 1)
		go func() { prep <- prepRecv(goTB{t}, te, "late", ids, -1) }()
		// Queued, and blocked: a scheduler step found no pages for it (what
		// a router reads as saturation).
		queued := pollUntil(te, prep, func(m Metrics) bool { return m.Waiting == 1 && m.Blocked == 1 && m.Running == 1 })
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
	}
	t.Fatal("the generation ended before the prep_recv was queued, 5 times")
}

// pollUntil polls the engine's metrics until cond holds, reporting true,
// or until done delivers (the awaited answer came first), reporting false;
// what done delivered is put back.
func pollUntil[T any](te *testEngine, done chan T, cond func(Metrics) bool) bool {
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

// TestWithdrawnPrepRecvUnblocksTheQueue checks that when the client of the
// prep_recv at the head of the queue goes away, the prep_recv behind it,
// which fits, is served at once, with no other call reaching the engine.
func TestWithdrawnPrepRecvUnblocksTheQueue(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tok := tiny.New()
	long := tok.Encode(strings.Repeat(" the sun", 100)) // 13 of 16 pages
	prepRecv(t, te, "a", long, -1)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() { // b needs 7 pages: it waits at the head of the queue
		defer close(gone)
		body := fmt.Sprintf(`{"prompt":%s,"end":-1,"user":"b"}`, mustJSON(tok.Encode(strings.Repeat(" a cat", 50))))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, te.url+protocol.PathPrepRecv, strings.NewReader(body))
		if resp, err := te.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 1 })
	short := tok.Encode(" the end")
	prep := make(chan protocol.PrepRecvResponse, 1)
	go func() { prep <- prepRecv(goTB{t}, te, "c", short, -1) }() // fits, but queued behind b
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 2 })
	cancel()
	select {
	case <-prep:
	case <-time.After(wakeDeadline):
		t.Fatal("the prep_recv behind a withdrawn one still waits")
	}
	<-gone
	consume(t, te, "c", short)
	consume(t, te, "a", long)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
