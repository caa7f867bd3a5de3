package router

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// A session's turns go to the engine of its first, whose prefix cache
// holds the conversation: every later turn reports its whole history
// cached. The same turns without a key go round the three engines (least
// loaded, ties in turn) and find nothing: what the test would see if the
// hint did nothing.
func TestSessionsStick(t *testing.T) {
	c := startCore(t, 3, Config{Mode: ModeWhole, PrefixCache: engine.PrefixCacheRadix}, nil)
	run := func(key string, seed uint64, turns int) []int {
		prompt := randomPromptIDs(seed, 200)
		var cached []int
		for turn := range turns {
			body := greedy(slices.Clone(prompt), 4)
			if key != "" {
				body["prompt_cache_key"] = key
			}
			u := usageOfCall(t, c.base, body, turn%2 == 1)
			cached = append(cached, u.Cached())
			prompt = append(prompt, randomPromptIDs(seed*100+uint64(turn), 40)...)
		}
		return cached
	}
	home := testutil.ToFloat64(sharedMetrics().cache.sessions.WithLabelValues("tiny", engine.RoleAny, sessionHome))
	cached := run("thread-1", 7, 4)
	for turn, n := range cached[1:] {
		// The previous turn's prompt, in whole pages, less the last token.
		if want := (200+40*turn)/kvPageTokens*kvPageTokens - 16; n < want {
			t.Errorf("with a key, turn %d: %d cached, want at least %d (the turns: %v)", turn+2, n, want, cached)
		}
	}
	if got := testutil.ToFloat64(sharedMetrics().cache.sessions.WithLabelValues("tiny", engine.RoleAny, sessionHome)) - home; got != 3 {
		t.Errorf("%v turns went home, want 3", got)
	}
	if plain := run("", 8, 3); slices.Max(plain[1:]) != 0 {
		t.Errorf("without a key the turns went round the engines and should find nothing cached: %v", plain)
	}
}

// The session's engine keeps it within the balance: 8 calls more than
// the least loaded engine, or 1.5 times its calls; beyond both, the
// policy chooses, and its choice is the session's engine from then on.
func TestSessionBalance(t *testing.T) {
	r := &Router{Config: Config{Model: "m"}, live: NewLive()}
	q := &Request{Model: "m", Session: sessionID("s")}
	r.live.sessions.set(sessionEntry{key: sessionKeyOf(q, ""), engine: "b", seen: time.Now()})
	views := func(a, b float64) []Candidate {
		return []Candidate{{Addr: "a", Others: a}, {Addr: "b", Others: b}}
	}
	for _, tc := range []struct {
		a, b    float64
		home    int
		outcome string
	}{
		{0, 8, 1, sessionHome},   // 8 calls ahead: kept
		{0, 9, -1, sessionLoad},  // 9 ahead of an idle engine
		{10, 18, 1, sessionHome}, // 8 ahead
		{20, 29, 1, sessionHome}, // 9 ahead, but under 1.5 times
		{10, 16, 1, sessionHome},
		{12, 30, -1, sessionLoad}, // 18 ahead and 2.5 times
	} {
		v := views(tc.a, tc.b)
		i, outcome := r.sessionChoice(q, "", v, time.Now())
		if i != tc.home || outcome != tc.outcome || !v[1].SessionHome || v[0].SessionHome {
			t.Errorf("loads %v, %v: %d %s (home marked %v), want %d %s", tc.a, tc.b, i, outcome, v[1].SessionHome, tc.home, tc.outcome)
		}
	}
	if i, outcome := r.sessionChoice(q, "", []Candidate{{Addr: "a"}}, time.Now()); i != -1 || outcome != sessionElsewhere {
		t.Errorf("its engine not a candidate: %d %s, want the policy's choice, elsewhere", i, outcome)
	}
	other := &Request{Model: "m", Session: sessionID("t")}
	if i, outcome := r.sessionChoice(other, "", views(0, 0), time.Now()); i != -1 || outcome != sessionNew {
		t.Errorf("an unknown session: %d %s, want new", i, outcome)
	}
	if i, outcome := r.sessionChoice(q, "", views(0, 0), time.Now().Add(DefaultSessionTTL+time.Second)); i != -1 || outcome != sessionNew {
		t.Errorf("a session past its TTL: %d %s, want new (forgotten)", i, outcome)
	}
	r.PrefixCache = engine.PrefixCacheDisable
	if i, outcome := r.sessionChoice(other, "", views(0, 0), time.Now()); i != -1 || outcome != "" {
		t.Errorf("without a prefix cache: %d %q, want no hint", i, outcome)
	}
}

// The table keeps maxSessions sessions, forgetting the least recently
// heard from first.
func TestSessionTableBound(t *testing.T) {
	var tb sessionTable
	now := time.Now()
	for i := range maxSessions + 1 {
		tb.set(sessionEntry{key: sessionKey{model: "m", session: uint64(i + 1)}, engine: "e", seen: now})
	}
	if n := tb.len(); n != maxSessions {
		t.Fatalf("%d sessions kept, want %d", n, maxSessions)
	}
	if _, ok := tb.home(sessionKey{model: "m", session: 1}, now, time.Hour); ok {
		t.Error("the first session is still kept")
	}
	if _, ok := tb.home(sessionKey{model: "m", session: maxSessions + 1}, now, time.Hour); !ok {
		t.Error("the last session is forgotten")
	}
}

// A session's marks say how much of its next prompt the engine holds: all
// of the last prompt's full pages when the next extends it, at least the
// mark before a divergence, nothing for another conversation.
func TestSessionMarks(t *testing.T) {
	last := prefixChain(randomPromptIDs(3, 40*kvPageTokens))
	marks := sessionMarks(last)
	if len(marks) > 25 || marks[len(marks)-1].Pages != len(last) {
		t.Fatalf("%d marks, the last of %d pages: want at most 25, the last of %d", len(marks), marks[len(marks)-1].Pages, len(last))
	}
	next := prefixChain(append(randomPromptIDs(3, 40*kvPageTokens), randomPromptIDs(4, 100)...))
	if got := marksMatch(marks, next); got != 40*kvPageTokens {
		t.Errorf("an extended prompt: %d, want %d", got, 40*kvPageTokens)
	}
	diverged := randomPromptIDs(3, 40*kvPageTokens)
	diverged[30*kvPageTokens+5]++ // page 31 differs
	if got := marksMatch(marks, prefixChain(diverged)); got < 30*kvPageTokens*7/8 || got > 30*kvPageTokens {
		t.Errorf("a prompt diverging at page 31: %d, want within an eighth under %d", got, 30*kvPageTokens)
	}
	if got := marksMatch(marks, prefixChain(randomPromptIDs(5, 600))); got != 0 {
		t.Errorf("another conversation: %d, want 0", got)
	}
	if sessionID("") != 0 || sessionID("a") == sessionID("b") || sessionID("a") == 0 {
		t.Error("session ids: the empty key is no session, two keys two ids")
	}
}

// The cache accounting: a session sent back to its engine is expected to
// find its last prompt there. When the engine restarted in between (a
// fresh process, an empty cache), what it reused falls short, and the
// missed tokens say so, per engine.
func TestCacheAccountingMissesARestart(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole, PrefixCache: engine.PrefixCacheRadix}, nil)
	addr := c.r.Endpoints[0].Addr()
	counts := func() (expected, reused, missed float64) {
		m := sharedMetrics().cache
		return testutil.ToFloat64(m.expected.WithLabelValues("tiny", addr)), testutil.ToFloat64(m.reused.WithLabelValues("tiny", addr)),
			testutil.ToFloat64(m.missed.WithLabelValues("tiny", addr))
	}
	prompt := randomPromptIDs(11, 320)
	turn := func() {
		body := greedy(slices.Clone(prompt), 4)
		body["prompt_cache_key"] = "agent-7"
		usageOfCall(t, c.base, body, true)
		prompt = append(prompt, randomPromptIDs(uint64(len(prompt)), 40)...)
	}
	eb, _, mb := counts()
	turn() // 320 tokens, 20 pages
	e0, r0, m0 := counts()
	turn() // 360, of which the first turn's 320
	e1, r1, m1 := counts()
	if e1-e0 != 320 || r1-r0 < 320 || m1 != m0 {
		t.Errorf("the second turn: expected %v, reused %v, missed %v; want 320 expected and reused, none missed", e1-e0, r1-r0, m1-m0)
	}
	u := c.r.handle.get().upstreams[0]
	pid := c.fleet.PID(0)
	changed := c.fleet.live.NextChange()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	for ready, now := u.status(); !ready || now == pid; ready, now = u.status() {
		select {
		case <-changed:
			changed = c.fleet.live.NextChange()
		case <-deadline:
			t.Fatal("the engine did not come back within a minute")
		}
	}
	turn() // 400, of which the second turn's 352 in whole pages
	e2, r2, m2 := counts()
	if e2-e1 != 352 || r2-r1 != 0 || m2-m1 != 352 {
		t.Errorf("after a restart: expected %v, reused %v, missed %v; want 352 expected, all of it missed", e2-e1, r2-r1, m2-m1)
	}
	if st := c.r.UpstreamStatus(u, c.fleet.PID(0)).Cache; st == nil || st.Missed != int64(m2-mb) || st.Expected != int64(e2-eb) {
		t.Errorf("the engine's status says %+v, want the counters' %v expected, %v missed", st, e2-eb, m2-mb)
	}
}
