package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for the limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newLimiter(t *testing.T, rules ...Rule) (*Limiter, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := New(Options{Rules: rules, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

func reserve(t *testing.T, l *Limiter, tenant string, tokens int64) (*Reservation, Decision) {
	t.Helper()
	r, d, err := l.Reserve(context.Background(), tenant, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed != (r != nil) {
		t.Fatalf("decision %v with reservation %v", d.Allowed, r)
	}
	return r, d
}

// A tenant of 300 tokens per minute is refused once it spent them, with
// OpenAI's 429, and served again after the reset; others are not refused.
func TestSpentThenReset(t *testing.T) {
	l, c := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 300})
	for i := range 3 {
		r, d := reserve(t, l, "a", 100)
		if !d.Allowed {
			t.Fatalf("request %d refused: %v", i, &d)
		}
		if err := r.Settle(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
		if _, d := reserve(t, l, "b", 1_000_000); !d.Allowed || d.Tokens != nil {
			t.Fatalf("tenant without a budget: %+v", d)
		}
	}
	_, d := reserve(t, l, "a", 10)
	if d.Allowed || d.Exceeded != ExceededTokens {
		t.Fatalf("after spending 300 of 300: %+v", d)
	}
	// 10 tokens refill in 2 s at 300 a minute.
	if d.RetryAfter != 2*time.Second {
		t.Fatalf("retry after %v, want 2s", d.RetryAfter)
	}
	rec := httptest.NewRecorder()
	d.SetHeaders(rec.Header())
	d.Error().Write(rec)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d", rec.Code)
	}
	for h, want := range map[string]string{
		"Retry-After":                  "2",
		"x-ratelimit-limit-tokens":     "300",
		"x-ratelimit-remaining-tokens": "0",
		"x-ratelimit-reset-tokens":     "1m0s",
	} {
		if got := rec.Header().Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	wantMsg := "Rate limit reached on tokens per min (TPM): Limit 300, Used 300, Requested 10. Please try again in 2s."
	if body.Error.Type != "tokens" || body.Error.Code != CodeRateLimitExceeded || body.Error.Message != wantMsg || body.Error.Param != nil {
		t.Fatalf("body %s", rec.Body)
	}
	c.advance(59 * time.Second)
	if _, d := reserve(t, l, "a", 300); d.Allowed {
		t.Fatal("300 tokens allowed 59 s after spending 300")
	}
	c.advance(time.Second)
	if _, d := reserve(t, l, "a", 300); !d.Allowed || d.Tokens.Remaining != 0 {
		t.Fatalf("after the reset: %+v", d)
	}
}

// The bucket refills continuously: a third of a minute gives back a third.
func TestGradualRefill(t *testing.T) {
	l, c := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 300})
	reserve(t, l, "a", 300)
	c.advance(20 * time.Second)
	if _, d := reserve(t, l, "a", 101); d.Allowed || d.RetryAfter != 200*time.Millisecond || d.Tokens.Remaining != 100 {
		t.Fatalf("101 tokens 20 s later: %+v %+v", d, d.Tokens)
	}
	if _, d := reserve(t, l, "a", 100); !d.Allowed || d.Tokens.Remaining != 0 || d.Tokens.Reset != time.Minute {
		t.Fatalf("100 tokens 20 s later: %+v %+v", d, d.Tokens)
	}
}

// max_tokens is reserved, and what was not generated given back.
func TestRefunds(t *testing.T) {
	l, _ := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 300, RequestsPerMinute: 10})
	r, d := reserve(t, l, "a", 250)
	if d.Tokens.Remaining != 50 || d.Requests.Remaining != 9 {
		t.Fatalf("after reserving 250: %+v %+v", d.Tokens, d.Requests)
	}
	if _, d := reserve(t, l, "a", 100); d.Allowed {
		t.Fatal("100 allowed with 250 of 300 reserved")
	}
	// The client went away after 30 tokens of prompt and generation.
	if err := r.Settle(context.Background(), 30); err != nil {
		t.Fatal(err)
	}
	r.Settle(context.Background(), 0) // settled once only
	r.Cancel(context.Background())
	r2, d := reserve(t, l, "a", 270)
	if !d.Allowed || d.Tokens.Remaining != 0 || d.Requests.Remaining != 8 {
		t.Fatalf("270 after 30 spent: %+v %+v", d.Tokens, d.Requests)
	}
	// Not served at all: the tokens and the request come back.
	r2.Cancel(context.Background())
	_, d = reserve(t, l, "a", 0)
	if d.Tokens.Remaining != 270 || d.Requests.Remaining != 8 {
		t.Fatalf("after a cancel: %+v %+v", d.Tokens, d.Requests)
	}
}

func TestRequestsPerMinute(t *testing.T) {
	l, c := newLimiter(t, Rule{Tenant: "*", RequestsPerMinute: 2})
	reserve(t, l, "a", 0)
	reserve(t, l, "a", 0)
	_, d := reserve(t, l, "a", 0)
	if d.Allowed || d.Exceeded != ExceededRequests || d.RetryAfter != 30*time.Second || d.Tokens != nil {
		t.Fatalf("third request of 2 a minute: %+v", d)
	}
	e := d.Error()
	if e.Type != "requests" || *e.Code != CodeRateLimitExceeded || e.Status != 429 || e.RetryAfter != 30*time.Second {
		t.Fatalf("error %+v", e)
	}
	h := http.Header{}
	d.SetHeaders(h)
	if h.Get("x-ratelimit-reset-requests") != "1m0s" || h.Get("x-ratelimit-remaining-requests") != "0" || h.Get("x-ratelimit-limit-tokens") != "" {
		t.Fatalf("headers %v", h)
	}
	if _, d := reserve(t, l, "b", 0); !d.Allowed {
		t.Fatal("the default budget is each tenant's own")
	}
	c.advance(30 * time.Second)
	if _, d := reserve(t, l, "a", 0); !d.Allowed {
		t.Fatal("refused once a request refilled")
	}
}

// Concurrent reservations never spend more than the budget.
func TestConcurrentReservations(t *testing.T) {
	l, _ := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 1000, RequestsPerMinute: 1000})
	var mu sync.Mutex
	var granted []*Reservation
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			r, d, err := l.Reserve(context.Background(), "a", int64(7+i%5))
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				mu.Lock()
				granted = append(granted, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, r := range granted {
		sum += r.Tokens()
	}
	_, d := reserve(t, l, "a", 0)
	if sum > 1000 || sum < 1000-11 || d.Tokens.Remaining != 1000-sum {
		t.Fatalf("reserved %d in %d requests, remaining %d, of 1000", sum, len(granted), d.Tokens.Remaining)
	}
	for _, r := range granted {
		wg.Go(func() { r.Cancel(context.Background()) })
	}
	wg.Wait()
	if _, d := reserve(t, l, "a", 0); d.Tokens.Remaining != 1000 || d.Requests.Remaining != 1000-2 {
		t.Fatalf("after cancelling all: %+v %+v", d.Tokens, d.Requests)
	}
}

// A request larger than the whole budget waits for a full bucket, and
// its real cost beyond is a debt.
func TestLargerThanBudget(t *testing.T) {
	l, c := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 300})
	small, _ := reserve(t, l, "a", 10)
	if _, d := reserve(t, l, "a", 4000); d.Allowed || d.RetryAfter != 2*time.Second {
		t.Fatalf("4000 tokens with 10 reserved: %+v", d)
	}
	small.Cancel(context.Background())
	r, d := reserve(t, l, "a", 4000)
	if !d.Allowed || r.Tokens() != 300 || d.Tokens.Remaining != 0 {
		t.Fatalf("4000 tokens of a full bucket of 300: %+v, reserved %d", d, r.Tokens())
	}
	r.Settle(context.Background(), 900)
	_, d = reserve(t, l, "a", 1)
	if d.Allowed || d.RetryAfter != 2*time.Minute+200*time.Millisecond || d.Tokens.Reset != 3*time.Minute {
		t.Fatalf("after spending 900 of 300: %+v %+v", d, d.Tokens)
	}
	c.advance(3 * time.Minute)
	if _, d := reserve(t, l, "a", 300); !d.Allowed {
		t.Fatal("not served once the debt was paid")
	}
}

// New rules keep what tenants spent.
func TestSetRulesKeepsSpending(t *testing.T) {
	l, _ := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 300})
	reserve(t, l, "a", 300)
	if err := l.SetRules([]Rule{{Tenant: "a", TokensPerMinute: 600}}); err != nil {
		t.Fatal(err)
	}
	if _, d := reserve(t, l, "a", 0); d.Tokens.Remaining != 300 || d.Tokens.Limit != 600 || d.Tokens.Reset != 30*time.Second {
		t.Fatalf("after raising the limit: %+v", d.Tokens)
	}
	if err := l.SetRules([]Rule{{Tenant: "a"}}); err == nil {
		t.Fatal("a budget of nothing accepted")
	}
}

func TestRules(t *testing.T) {
	l, _ := newLimiter(t,
		Rule{Tenant: "*", TokensPerMinute: 1},
		Rule{Tenant: "team-*", TokensPerMinute: 2, Shared: true},
		Rule{Tenant: "*-bot", TokensPerMinute: 3},
		Rule{Tenant: "team-lead", TokensPerMinute: 4},
	)
	for tenant, want := range map[string]int64{"x": 1, "team-a": 2, "team-bot": 2, "my-bot": 3, "team-lead": 4, "": 1} {
		if _, d := reserve(t, l, tenant, 0); d.Tokens == nil || d.Tokens.Limit != want {
			t.Errorf("tenant %q: %+v, want the limit %d", tenant, d.Tokens, want)
		}
	}
	// team-* is shared: one spends it for all.
	reserve(t, l, "team-a", 2)
	if _, d := reserve(t, l, "team-b", 1); d.Allowed {
		t.Fatal("a shared budget spent by one is not spent for the others")
	}
	// Each tenant of "*" has its own.
	reserve(t, l, "x", 1)
	if _, d := reserve(t, l, "y", 1); !d.Allowed {
		t.Fatal("the default budget shared")
	}
	for _, bad := range [][]Rule{
		{{Tenant: "", TokensPerMinute: 1}},
		{{Tenant: "a", TokensPerMinute: -1}},
		{{Tenant: "a", RequestsPerMinute: MaxLimit + 1}},
		{{Tenant: "a", TokensPerMinute: 1}, {Tenant: "a", RequestsPerMinute: 1}},
	} {
		if _, err := New(Options{Rules: bad}); err == nil {
			t.Errorf("rules %+v accepted", bad)
		}
	}
}

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"a*", "a", true}, {"a*", "abc", true}, {"a*", "ba", false},
		{"*b", "ab", true}, {"*b", "ba", false},
		{"a*b*c", "axbyc", true}, {"a*b*c", "abc", true}, {"a*b*b", "ab", false},
		{"a*b*c", "acb", false}, {"*", "", true}, {"**", "x", true}, {"x*x", "x", false},
	} {
		if got := matchPattern(tc.pattern, tc.name); got != tc.want {
			t.Errorf("matchPattern(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

func TestFormatReset(t *testing.T) {
	for d, want := range map[time.Duration]string{
		6 * time.Minute:                  "6m0s",
		time.Second:                      "1s",
		20 * time.Millisecond:            "20ms",
		1500 * time.Millisecond:          "1.5s",
		time.Microsecond:                 "1ms",
		19*time.Millisecond + 1:          "20ms",
		0:                                "0s",
		-time.Second:                     "0s",
		time.Hour + 90*time.Second + 300: "1h1m30.001s",
	} {
		if got := FormatReset(d); got != want {
			t.Errorf("FormatReset(%v) = %q, want %q", d, got, want)
		}
	}
}

// The memory store forgets tenants whose buckets are full again.
func TestMemoryStoreForgets(t *testing.T) {
	store := NewMemoryStore()
	c := &clock{t: time.Unix(1e9, 0)}
	l, err := New(Options{Rules: []Rule{{Tenant: "*", TokensPerMinute: 100}}, Store: store, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		reserve(t, l, fmt.Sprint(i), 10)
	}
	if n := store.Len(); n != 3000 {
		t.Fatalf("%d states for 3000 tenants", n)
	}
	c.advance(6 * time.Second) // 10 tokens refill at 100 a minute
	for range 40000 {
		r, _ := reserve(t, l, "busy", 1)
		r.Cancel(context.Background())
	}
	if n := store.Len(); n > 1 {
		t.Fatalf("%d states kept of tenants whose buckets are full again", n)
	}
}

// retryStore calls fn twice per update, the first on a copy it throws
// away, as a store that retries a compare-and-swap does.
type retryStore struct{ inner *MemoryStore }

func (s retryStore) Update(ctx context.Context, key string, fn func(*State)) error {
	return s.inner.Update(ctx, key, func(st *State) {
		scratch := *st
		fn(&scratch)
		fn(st)
	})
}

func TestStoreRetries(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, err := New(Options{Rules: []Rule{{Tenant: "a", TokensPerMinute: 300, RequestsPerMinute: 5}}, Store: retryStore{NewMemoryStore()}, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	r, d := reserve(t, l, "a", 200)
	if d.Tokens.Remaining != 100 || d.Requests.Remaining != 4 {
		t.Fatalf("a retried update spent twice: %+v %+v", d.Tokens, d.Requests)
	}
	r.Settle(context.Background(), 50)
	if _, d := reserve(t, l, "a", 250); !d.Allowed || d.Tokens.Remaining != 0 {
		t.Fatalf("after a retried refund: %+v", d.Tokens)
	}
}

func TestLimited(t *testing.T) {
	l, _ := newLimiter(t, Rule{Tenant: "a", TokensPerMinute: 10})
	if !l.Limited("a") || l.Limited("b") {
		t.Fatal("Limited")
	}
	if _, d := reserve(t, l, "a", 11); d.String() != "allowed" {
		t.Fatalf("a request larger than a full budget: %v", &d)
	}
	if _, d := reserve(t, l, "a", 1); d.String() != "over the tokens budget, retry in 6s" {
		t.Fatalf("String: %v", &d)
	}
}

func BenchmarkReserveSettle(b *testing.B) {
	l, err := New(Options{Rules: []Rule{{Tenant: "*", TokensPerMinute: MaxLimit, RequestsPerMinute: MaxLimit}}})
	if err != nil {
		b.Fatal(err)
	}
	tenants := make([]string, 1000)
	for i := range tenants {
		tenants[i] = fmt.Sprint("tenant", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r, _, _ := l.Reserve(ctx, tenants[i%len(tenants)], 1000)
			r.Settle(ctx, 300)
			i++
		}
	})
}
