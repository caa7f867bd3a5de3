package builtin

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

func prepRecv(t testing.TB, te *testEngine, user string, ids []int, end int) protocol.PrepRecvResponse {
	t.Helper()
	r := &router{t: t, client: te.client, decode: te.url}
	return r.prepRecv(user, ids, end)
}

func TestPrepRecvTimeoutReclaimsPages(t *testing.T) {
	te := newTestEngine(t, "prep_recv_timeout_ms=50", true)
	ids := tiny.New().Encode(clip(prompts(10)[7], 100))
	prepRecv(t, te, "late", ids, -1)
	m := te.waitMetrics(func(Metrics) bool { return true })
	if m.Prepared != 1 || m.Pages.Used != pagesFor(len(ids)-1) {
		t.Fatalf("after prep_recv: %+v, want %d pages used", m, pagesFor(len(ids)-1))
	}
	te.waitMetrics(func(m Metrics) bool { return m.Prepared == 0 && m.Pages.Used == 0 })
	status, body := post(t, te.client, te.url+protocol.PathStartGenerate, map[string]any{"prompt": ids, "begin": len(ids) - 1, "user": "late"})
	if status != http.StatusBadRequest {
		t.Fatalf("start_generate after the timeout: %d %s", status, body)
	}
}

func TestSecondPrepRecvReplacesFirst(t *testing.T) {
	te := newTestEngine(t, "", true, "--prefix-cache-mode", "disable")
	ids := tiny.New().Encode(clip(prompts(10)[7], 100))
	a := prepRecv(t, te, "u", ids, -1)
	b := prepRecv(t, te, "u", ids, 20)
	if a.KVAppendMetadata == b.KVAppendMetadata {
		t.Fatal("second reservation has the first one's slots")
	}
	m := te.waitMetrics(func(Metrics) bool { return true })
	if m.Prepared != 1 || m.Pages.Used != pagesFor(20) {
		t.Fatalf("after two prep_recv: %+v, want %d pages used", m, pagesFor(20))
	}
	// A start_generate from 0 on the reservation completes and frees it.
	want := complete(t, te.client, te.url, protocol.PathCompletions, greedy(ids, 5))
	got := complete(t, te.client, te.url, protocol.PathStartGenerate, with(greedy(ids, 5), "begin", 0, "user", "u"))
	if got.texts[0] != want.texts[0] {
		t.Fatalf("start_generate from 0: %q, want %q", got.texts[0], want.texts[0])
	}
}

// TestPrepRecvMetadata checks the MLC format of kv_append_metadata and the
// prefix match reported through the debug_config path.
func TestPrepRecvMetadata(t *testing.T) {
	te := newTestEngine(t, "", true)
	ids := tiny.New().Encode(clip(prompts(40)[33], 200))
	complete(t, te.client, te.url, protocol.PathCompletions, greedy(ids, 2))
	res := complete(t, te.client, te.url, protocol.PathCompletions, map[string]any{"prompt": ids, "user": "m",
		"debug_config": map[string]any{"disagg_config": map[string]any{"kind": "prepare_receive", "kv_window_end": -1}}})
	matched := extraInt(t, res.usage, "prefix_matched_length")
	if matched == 0 || matched%kvcache.PageSize != 0 || extraInt(t, res.usage, "prompt_length") != len(ids) {
		t.Fatalf("usage.extra %s", res.usage.Extra)
	}
	var encoded string
	if err := jsonUnmarshal(res.usage.Extra["kv_append_metadata"], &encoded); err != nil {
		t.Fatal(err)
	}
	meta, err := protocol.DecodeKVAppendMetadata(encoded, 1)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Tokens(0) != len(ids)-1-matched {
		t.Fatalf("metadata holds %d tokens, want %d", meta.Tokens(0), len(ids)-1-matched)
	}
	for _, seg := range meta[0] {
		if seg.Start%kvcache.PageSize != 0 && seg.Start != meta[0][0].Start {
			t.Errorf("segment %+v does not start a page", seg)
		}
	}
	// Replace the reservation by an empty one, and generate on that.
	prepRecv(t, te, "m", ids[:1], 0)
	got := complete(t, te.client, te.url, protocol.PathStartGenerate, with(greedy(ids[:1], 3), "begin", 0, "user", "m"))
	if got.finish[0] != "length" {
		t.Fatalf("start_generate on an empty reservation: %v", got.finish)
	}
}

// TestPrepRecvWaitsForPages checks that a prep_recv the cache cannot hold
// waits (it preempts nothing) until pages free up, and that a waiting
// prep_recv whose client goes away is withdrawn.
func TestPrepRecvWaitsForPages(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tok := tiny.New()
	long := tok.Encode(strings.Repeat(" the sun", 100)) // 200 tokens: 13 of 16 pages
	short := tok.Encode(strings.Repeat(" a cat", 50))   // 100 tokens: 7 pages
	prepRecv(t, te, "a", long, -1)
	got := make(chan protocol.PrepRecvResponse, 1)
	go func() { got <- prepRecv(goTB{t}, te, "b", short, -1) }()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 1 })

	// A client that gives up while waiting leaves nothing behind.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, te.url+protocol.PathPrepRecv,
		strings.NewReader(`{"prompt":"the end","end":-1,"user":"c"}`))
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := te.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 2 })
	cancel()
	<-gone
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 1 })

	prepRecv(t, te, "a", long, 0) // replaces a's reservation with an empty one
	res := <-got
	if meta, err := protocol.DecodeKVAppendMetadata(res.KVAppendMetadata, 1); err != nil || meta.Tokens(0) != len(short)-1 {
		t.Fatalf("b's reservation: %v %v", meta, err)
	}
	// b's reservation is replaced first: a's prompt needs its pages.
	for _, user := range []string{"b", "a"} {
		ids := map[string][]int{"a": long, "b": short}[user]
		prepRecv(t, te, user, ids, 0)
		complete(t, te.client, te.url, protocol.PathStartGenerate, with(greedy(ids, 1), "begin", 0, "user", user))
	}
}

// TestReservationsJumpTheQueue checks that a start_generate on pages that
// prep_recv reserved starts even when a request ahead of it in the queue
// waits for pages those reservations hold.
func TestReservationsJumpTheQueue(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tok := tiny.New()
	long := tok.Encode(strings.Repeat(" the sun", 100)) // 13 of 16 pages
	prepRecv(t, te, "a", long, -1)
	other := make(chan result, 1)
	go func() {
		other <- complete(goTB{t}, te.client, te.url, protocol.PathCompletions, greedy(strings.Repeat(" a cat", 50), 2))
	}()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 1 })
	got := complete(t, te.client, te.url, protocol.PathStartGenerate, with(greedy(long, 2), "begin", 0, "user", "a"))
	if got.finish[0] != "length" {
		t.Fatalf("reserved request: %v", got.finish)
	}
	if r := <-other; r.finish[0] != "length" {
		t.Fatalf("queued request: %v", r.finish)
	}
}
