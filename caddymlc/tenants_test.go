package caddymlc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// tenantSite starts two built-in engines of batch 8 in whole mode, with
// tenants and bands from headers, and opts.
func tenantSite(t *testing.T, opts string) *site {
	t.Helper()
	return startSite(t, 2, "\t\t\tmode whole\n\t\t\tengine_args --overrides max_num_sequence=8\n"+
		"\t\t\ttenant {http.request.header.X-Tenant}\n\t\t\tpriority {http.request.header.X-Priority}\n"+opts)
}

// ttft streams a completion as tenant in band and returns the time to
// its first text, and whether it ended well.
func ttft(ctx context.Context, base, tenant string, band, maxTokens int) (time.Duration, error) {
	body := fmt.Sprintf(`{"prompt":"the story of %s","max_tokens":%d,"temperature":0,"stream":true}`, tenant, maxTokens)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+protocol.PathCompletions, strings.NewReader(body))
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("X-Priority", strconv.Itoa(band))
	begin := time.Now()
	resp, err := httpClient().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if first == 0 && strings.Contains(line, `"text":"`) && !strings.Contains(line, `"text":""`) {
			first = time.Since(begin)
		}
		if line == "data: [DONE]" {
			return first, nil
		}
	}
	return 0, fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
}

// flood keeps n streams of tenant in band in flight until ctx ends; the
// function it returns gives the times to first token of the streams that
// began after since, and the failures.
func flood(ctx context.Context, base, tenant string, band, n, maxTokens int) (func(since time.Time) ([]time.Duration, []error), *sync.WaitGroup) {
	type record struct {
		began time.Time
		ttft  time.Duration
	}
	var mu sync.Mutex
	var records []record
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				began := time.Now()
				d, err := ttft(ctx, base, tenant, band, maxTokens)
				mu.Lock()
				switch {
				case ctx.Err() != nil:
				case err != nil:
					errs = append(errs, err)
				default:
					records = append(records, record{began, d})
				}
				mu.Unlock()
			}
		})
	}
	return func(since time.Time) ([]time.Duration, []error) {
		mu.Lock()
		defer mu.Unlock()
		var out []time.Duration
		for _, r := range records {
			if !r.began.Before(since) {
				out = append(out, r.ttft)
			}
		}
		return out, slices.Clone(errs)
	}, &wg
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// The router owns the queue when the engines are saturated, and serves
// tenants fairly by tokens: while tenant A keeps 48 streams in flight on
// engines that run 16 at once, tenant B's first token comes far sooner
// than A's; with both flooding, B (8 streams) in a higher band is served
// first. No request fails. The times compared are those of the requests
// that began once the engines were saturated. (The figures, with their
// goals, are tools/bench's -fairness run; here the bound is loose.)
func TestTenantsShareFairly(t *testing.T) {
	for _, c := range []struct {
		name          string
		bBand, bFlood int
	}{{"fair share", 0, 0}, {"higher band", 1, 8}} {
		t.Run(c.name, func(t *testing.T) {
			s := tenantSite(t, "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			aTimes, aWG := flood(ctx, s.base, "A", 0, 48, 96)
			t.Cleanup(aWG.Wait) // after the deferred cancel, on every way out
			waitFor(t, "A's flood to saturate the engines", func() bool {
				st := liveNow().lifecycle.Statuses()
				return len(st) == 1 && st[0].Gate.Waiting > 8
			})
			since := time.Now()
			var b []time.Duration
			if c.bFlood > 0 {
				bTimes, bWG := flood(ctx, s.base, "B", c.bBand, c.bFlood, 96)
				t.Cleanup(bWG.Wait)
				waitFor(t, "B's and A's streams", func() bool {
					gotB, _ := bTimes(since)
					gotA, _ := aTimes(since)
					return len(gotB) >= 24 && len(gotA) >= 8
				})
				cancel()
				bWG.Wait()
				var errs []error
				if b, errs = bTimes(since); len(errs) > 0 {
					t.Fatalf("B: %d requests failed: %v", len(errs), errs[0])
				}
			} else {
				for range 8 {
					d, err := ttft(ctx, s.base, "B", c.bBand, 8)
					if err != nil {
						t.Fatalf("B: %v", err)
					}
					b = append(b, d)
				}
			}
			waitFor(t, "A's streams", func() bool { got, _ := aTimes(since); return len(got) >= 8 })
			st := liveNow().lifecycle.Statuses()[0].Gate
			cancel()
			aWG.Wait()
			a, errs := aTimes(since)
			if len(errs) > 0 {
				t.Fatalf("A: %d requests failed: %v", len(errs), errs[0])
			}
			t.Logf("TTFT p50: A %v (%d streams), B %v (%d); gate batch %d capacity %d", p50(a), len(a), p50(b), len(b), st.Batch, st.Capacity)
			if st.Batch != 8 || st.Capacity != 16 {
				t.Errorf("gate batch %d capacity %d, want 8 and 16", st.Batch, st.Capacity)
			}
			if p50(b) > p50(a)/2 {
				t.Fatalf("B waited %v (p50) against A's %v: not served ahead of the flood", p50(b), p50(a))
			}
		})
	}
}

// A tenant with a budget gets OpenAI's 429 rate_limit_exceeded, with
// Retry-After and x-ratelimit-* headers, once it spent it, and is served
// again after Retry-After; every answer carries the headers; other
// tenants are never refused.
func TestBudgetsRefuseWithOpenAIHeaders(t *testing.T) {
	s := tenantSite(t, "\t\t\tbudget B tokens_per_minute 300\n")
	send := func(tenant string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, s.base+protocol.PathCompletions, strings.NewReader(`{"prompt":"the cat sat","max_tokens":4,"temperature":0}`))
		req.Header.Set("X-Tenant", tenant)
		resp, err := httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			raw.WriteString(sc.Text())
		}
		return resp, []byte(raw.String())
	}
	var refused *http.Response
	var body []byte
	for i := 0; i < 100 && refused == nil; i++ {
		resp, raw := send("B")
		switch resp.StatusCode {
		case http.StatusOK:
			if resp.Header.Get("x-ratelimit-limit-tokens") != "300" || resp.Header.Get("x-ratelimit-remaining-tokens") == "" {
				t.Fatalf("an answer without the budget's headers: %v", resp.Header)
			}
		case http.StatusTooManyRequests:
			refused, body = resp, raw
		default:
			t.Fatalf("%d %s", resp.StatusCode, raw)
		}
		if resp, raw := send("A"); resp.StatusCode != http.StatusOK {
			t.Fatalf("tenant A, without a budget: %d %s", resp.StatusCode, raw)
		}
	}
	if refused == nil {
		t.Fatal("a tenant of 300 tokens a minute was never refused")
	}
	var e struct{ Error protocol.Error }
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "tokens" || e.Error.Code == nil || *e.Error.Code != "rate_limit_exceeded" {
		t.Fatalf("429 body: %s", body)
	}
	retry, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 60 || refused.Header.Get("x-ratelimit-remaining-tokens") == "" || refused.Header.Get("x-ratelimit-reset-tokens") == "" {
		t.Fatalf("429 headers: %v", refused.Header)
	}
	deadline := time.Now().Add(time.Duration(retry)*time.Second + 30*time.Second)
	for {
		resp, raw := send("B")
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after Retry-After %ds: %d %s", retry, resp.StatusCode, raw)
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(wait, 1)) * time.Second) // the budget's own clock: Retry-After says when it refills
	}
	if v := metricValue(t, "caddy_mlc_rate_limited_total", "limit", "tokens"); v < 1 {
		t.Errorf("caddy_mlc_rate_limited_total{limit=tokens} = %v", v)
	}
}

// A reload keeps the budgets' counts: a tenant that spent its budget is
// still refused by the new config, the engines kept.
func TestReloadKeepsBudgets(t *testing.T) {
	port := freePorts(t, 1)[0]
	engines := endpointLines(freePorts(t, 2)...)
	opts := "\t\tmode whole\n\t\ttenant {http.request.header.X-Tenant}\n\t\tbudget B tokens_per_minute 300\n" + engines
	reloadSite(t, port, opts)
	t.Cleanup(func() { stopCaddy(t) })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// A new connection each time: a reload closes the old server's idle
	// connections, and a POST on one of them is not retried.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	send := func() int {
		req, _ := http.NewRequest(http.MethodPost, base+protocol.PathCompletions, strings.NewReader(`{"prompt":"the cat sat","max_tokens":40,"temperature":0}`))
		req.Header.Set("X-Tenant", "B")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "the first answer", func() bool { return send() == http.StatusOK })
	for i := 0; send() != http.StatusTooManyRequests; i++ {
		if i > 20 {
			t.Fatal("a tenant of 300 tokens a minute was never refused")
		}
	}
	reloadSite(t, port, "\t\tqueue_timeout 25s\n"+opts)
	if status := send(); status != http.StatusTooManyRequests {
		t.Fatalf("after the reload the spent budget answered %d: its count was lost", status)
	}
}
