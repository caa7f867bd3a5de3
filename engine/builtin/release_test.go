package builtin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// release posts /microserving/release for user and returns whether the
// engine released something.
func release(t testing.TB, te *testEngine, user string) bool {
	t.Helper()
	status, body := post(t, te.client, te.url+protocol.PathRelease, protocol.ReleaseRequest{User: user})
	if status != http.StatusOK {
		t.Fatalf("release %q: %d %s", user, status, body)
	}
	var res protocol.ReleaseResponse
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("release %q: %v: %s", user, err, body)
	}
	return res.Released
}

// TestReleaseFreesReservation checks that a released reservation gives its
// pages back at once, and that start_generate can no longer use it.
func TestReleaseFreesReservation(t *testing.T) {
	te := newTestEngine(t, "", true, "--prefix-cache-mode", "disable")
	ids := tiny.New().Encode(clip(prompts(10)[7], 100))
	prepRecv(t, te, "a", ids, -1)
	if m, _ := te.e.Metrics(); m.Prepared != 1 || m.Pages.Used != pagesFor(len(ids)-1) {
		t.Fatalf("after prep_recv: %+v", m)
	}
	if !release(t, te, "a") {
		t.Fatal("release of a reservation answered released: false")
	}
	// The answer comes after the pages are back: no waiting.
	if m, _ := te.e.Metrics(); m.Prepared != 0 || m.Pages.Used != 0 || m.Pages.Free != m.Pages.Total {
		t.Fatalf("after release: %+v", m)
	}
	if release(t, te, "a") || release(t, te, "nobody") {
		t.Fatal("release without a reservation answered released: true")
	}
	status, body := post(t, te.client, te.url+protocol.PathStartGenerate, map[string]any{"prompt": ids, "begin": len(ids) - 1, "user": "a"})
	if status != http.StatusBadRequest {
		t.Fatalf("start_generate on a released reservation: %d %s", status, body)
	}
}

// TestReleaseBeforePrepRecv is the race of a router that gives up on a
// prep_recv still on its way: the release reaches the engine first, and
// the prep_recv that follows is refused rather than reserving pages that
// nobody will use until they expire.
func TestReleaseBeforePrepRecv(t *testing.T) {
	te := newTestEngine(t, "", true, "--prefix-cache-mode", "disable")
	ids := tiny.New().Encode(clip(prompts(10)[3], 60))
	if release(t, te, "late") {
		t.Fatal("release of a user with nothing answered released: true")
	}
	status, body := post(t, te.client, te.url+protocol.PathPrepRecv, map[string]any{"prompt": ids, "end": -1, "user": "late"})
	perr := protocol.ParseError(status, body)
	if status != protocol.StatusClientClosedRequest || perr == nil || perr.Code == nil || *perr.Code != codeReleased {
		t.Fatalf("prep_recv after its release answered %d %s", status, body)
	}
	if m, _ := te.e.Metrics(); m.Prepared != 0 || m.Pages.Used != 0 {
		t.Fatalf("a released user's prep_recv reserved pages: %+v", m)
	}
	// Another user is served as usual.
	prepRecv(t, te, "other", ids, -1)
	if !release(t, te, "other") {
		t.Fatal("release of other's reservation answered released: false")
	}
}

// TestReleaseBadInputs checks the 400 answers of the release endpoint.
func TestReleaseBadInputs(t *testing.T) {
	te := newTestEngine(t, "", true)
	for name, body := range map[string]string{"no user": `{}`, "empty user": `{"user":""}`, "not an object": `[]`, "user not a string": `{"user":1}`, "empty body": ``} {
		resp, err := te.client.Post(te.url+protocol.PathRelease, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || protocol.ParseError(resp.StatusCode, []byte(b)) == nil {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	plain := newTestEngine(t, "", true, "--enable-debug=false")
	if status, body := post(t, plain.client, plain.url+protocol.PathRelease, map[string]any{"user": "a"}); status != http.StatusBadRequest {
		t.Errorf("release without --enable-debug: %d %s", status, body)
	}
}

// TestReleaseWithdrawsWaitingPrepRecv checks that releasing a user whose
// prep_recv waits for pages ends that call at once with an error.
func TestReleaseWithdrawsWaitingPrepRecv(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tok := tiny.New()
	long := tok.Encode(strings.Repeat(" the sun", 100)) // 13 of 16 pages
	short := tok.Encode(strings.Repeat(" a cat", 50))   // 7 pages
	prepRecv(t, te, "a", long, -1)
	type answer struct {
		status int
		body   []byte
	}
	waiting := make(chan answer, 1)
	go func() {
		status, body := post(goTB{t}, te.client, te.url+protocol.PathPrepRecv, map[string]any{"prompt": short, "end": -1, "user": "b"})
		waiting <- answer{status, body}
	}()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 1 })
	if !release(t, te, "b") {
		t.Fatal("release of a waiting prep_recv answered released: false")
	}
	select {
	case a := <-waiting:
		perr := protocol.ParseError(a.status, a.body)
		if a.status != 499 || perr == nil || perr.Code == nil || *perr.Code != codeReleased {
			t.Fatalf("withdrawn prep_recv answered %d %s", a.status, a.body)
		}
	case <-time.After(wakeDeadline):
		t.Fatal("the withdrawn prep_recv did not answer")
	}
	if m, _ := te.e.Metrics(); m.Waiting != 0 || m.Prepared != 1 {
		t.Fatalf("after the release: %+v", m)
	}
	if !release(t, te, "a") {
		t.Fatal("release of a's reservation answered released: false")
	}
}

// TestReleaseServesQueuedWork checks that the pages of a released
// reservation go at once to the completion and the prep_recv queued
// behind it, with no other call reaching the engine.
func TestReleaseServesQueuedWork(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256", true, "--prefix-cache-mode", "disable")
	tok := tiny.New()
	huge := tok.Encode(strings.Repeat(" the sun", 120)) // 15 of 16 pages
	short := tok.Encode(strings.Repeat(" a cat", 50))   // 7 pages
	prepRecv(t, te, "a", huge, -1)
	gen := make(chan result, 1)
	go func() {
		gen <- complete(goTB{t}, te.client, te.url, protocol.PathCompletions, greedy(strings.Repeat(" a dog", 50), 2))
	}()
	prep := make(chan protocol.PrepRecvResponse, 1)
	go func() { prep <- prepRecv(goTB{t}, te, "c", short, -1) }()
	te.waitMetrics(func(m Metrics) bool { return m.Waiting == 2 })
	if !release(t, te, "a") {
		t.Fatal("release answered released: false")
	}
	deadline := time.After(wakeDeadline)
	for range 2 {
		select {
		case r := <-gen:
			if r.finish[0] != "length" {
				t.Fatalf("queued completion: %v", r.finish)
			}
		case <-prep:
		case <-deadline:
			t.Fatal("queued work still waits after the release")
		}
	}
	consume(t, te, "c", short)
}

// TestExpiryServesQueuedWork checks that the pages of a reservation that
// expires go to the completion queued behind it, with no other call
// reaching the engine.
func TestExpiryServesQueuedWork(t *testing.T) {
	te := newTestEngine(t, "max_total_seq_length=256;prep_recv_timeout_ms=200", true, "--prefix-cache-mode", "disable")
	huge := tiny.New().Encode(strings.Repeat(" the sun", 120))
	prepRecv(t, te, "a", huge, -1)
	gen := make(chan result, 1)
	go func() {
		gen <- complete(goTB{t}, te.client, te.url, protocol.PathCompletions, greedy(strings.Repeat(" a dog", 50), 2))
	}()
	select {
	case r := <-gen:
		if r.finish[0] != "length" {
			t.Fatalf("queued completion: %v", r.finish)
		}
	case <-time.After(wakeDeadline):
		t.Fatal("queued completion still waits after the reservation expired")
	}
}
