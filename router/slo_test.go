package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// sloFront serves c's router with each request's targets from the
// X-SLO-* headers (milliseconds), as the adapter reads them, and returns
// its URL.
func sloFront(t testing.TB, c *core) string {
	t.Helper()
	models := NewModels([]*Router{c.r}, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var f Facts
		if v := req.Header.Get("X-SLO-TTFT-Ms"); v != "" {
			f.Targets.TTFT, _ = time.ParseDuration(v + "ms")
		}
		if v := req.Header.Get("X-SLO-TPOT-Ms"); v != "" {
			f.Targets.TPOT, _ = time.ParseDuration(v + "ms")
		}
		models.ServeHTTP(w, req.WithContext(WithFacts(req.Context(), f)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// sloPost sends a streamed greedy completion with targets (none when
// ttftMs is 0) and returns the status, the answer and its text.
func sloPost(t testing.TB, url string, prompt string, maxTokens, ttftMs, tpotMs int) (*http.Response, []byte, string) {
	t.Helper()
	resp, raw, text, err := sloTry(url, prompt, maxTokens, ttftMs, tpotMs)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw, text
}

// sloTry is sloPost for any goroutine: the error is returned.
func sloTry(url string, prompt string, maxTokens, ttftMs, tpotMs int) (*http.Response, []byte, string, error) {
	body := greedy(prompt, maxTokens)
	body["stream"] = true
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, url+protocol.PathCompletions, bytes.NewReader(b))
	if err != nil {
		return nil, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if ttftMs > 0 {
		req.Header.Set("X-SLO-TTFT-Ms", fmt.Sprint(ttftMs))
		req.Header.Set("X-SLO-TPOT-Ms", fmt.Sprint(tpotMs))
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return nil, nil, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	var text strings.Builder
	for line := range strings.Lines(string(raw)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
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
	return resp, raw, text.String(), err
}

// slow sets an engine's protocol.Slowness.
func slow(t testing.TB, engineURL string, prefill, decode time.Duration) {
	t.Helper()
	b, _ := json.Marshal(protocol.Slowness{PrefillPerToken: prefill, DecodePerStep: decode})
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(engineURL+protocol.PathSlowness, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", protocol.PathSlowness, resp.Status)
	}
}

// warm sends requests with loose targets until every engine's latency
// model predicts, within a generous deadline.
func warm(t testing.TB, c *core, url string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		all := true
		for _, u := range c.fleet.upstreams {
			p := c.r.UpstreamStatus(u, 0).Predicted
			all = all && p != nil && p.TTFTMs > 0
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the latency models predict nothing after %d requests", i)
		}
		if resp, raw, _ := sloPost(t, url, fmt.Sprintf("warm up %d", i), 4, 60_000, 60_000); resp.StatusCode != http.StatusOK {
			t.Fatalf("warm-up: %s %s", resp.Status, raw)
		}
	}
}

// TestSLOAdmissionRefusesUnmeetableTargets checks slo_admission: with
// shedding on, a request whose time-to-first-token target no engine can
// meet gets the configured status (here 429) in OpenAI's shape with
// Retry-After, at once, and counts as missed; with it off, the same
// request is served, late, with the same text.
func TestSLOAdmissionRefusesUnmeetableTargets(t *testing.T) {
	shed := startCore(t, 1, Config{Mode: ModeWhole, SLOAdmission: SLOAdmission{Shed: true, Status: http.StatusTooManyRequests, Margin: DefaultSLOMargin}}, SLOAware{})
	served := startCore(t, 1, Config{Mode: ModeWhole}, SLOAware{})
	slow(t, shed.engines[0], time.Millisecond, 10*time.Millisecond)
	slow(t, served.engines[0], time.Millisecond, 10*time.Millisecond)
	shedURL, servedURL := sloFront(t, shed), sloFront(t, served)
	warm(t, shed, shedURL)
	warm(t, served, servedURL)

	const prompt = "the quick brown fox jumps over the lazy dog and far away"
	begin := time.Now()
	resp, raw, _ := sloPost(t, shedURL, prompt, 8, 1, 1)
	took := time.Since(begin)
	var e struct {
		Error struct{ Type, Code, Message string } `json:"error"`
	}
	if resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(raw, &e) != nil || e.Error.Code != "slo_unattainable" || e.Error.Message == "" {
		t.Fatalf("shedding on, a 1 ms target: %s %s, want 429 slo_unattainable", resp.Status, raw)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("the refusal has no Retry-After")
	}
	if took > 250*time.Millisecond {
		t.Fatalf("the refusal took %v: it should not wait", took)
	}
	if st := shed.r.Status().SLO; st == nil || st.Requests-st.Met < 1 {
		t.Fatalf("the refused request is not counted as missed: %+v", st)
	}

	resp, raw, late := sloPost(t, servedURL, prompt, 8, 1, 1)
	if resp.StatusCode != http.StatusOK || late == "" {
		t.Fatalf("shedding off, a 1 ms target: %s %s, want it served", resp.Status, raw)
	}
	if want := served.complete(served.engines[0], greedy(prompt, 8)); late != want {
		t.Fatalf("served late: %q, the engine alone: %q", late, want)
	}
	resp, raw, _ = sloPost(t, shedURL, prompt, 8, 60_000, 60_000)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("shedding on, a loose target: %s %s", resp.Status, raw)
	}
}

// TestSLOAwareFollowsASlowedEngine slows one of two engines in the middle
// of a run: its predicted time to first token must follow within 10 s,
// and slo_aware must move the requests whose tight targets it can no
// longer meet to the other engine; the text stays the engines' own.
func TestSLOAwareFollowsASlowedEngine(t *testing.T) {
	tight := Targets{TTFT: 150 * time.Millisecond, TPOT: 40 * time.Millisecond}
	picks := &pickCounter{SLOAware: SLOAware{}, of: tight, n: map[string]int{}}
	c := startCore(t, 2, Config{Mode: ModeWhole}, picks)
	for _, e := range c.engines {
		slow(t, e, 100*time.Microsecond, 5*time.Millisecond)
	}
	url := sloFront(t, c)
	warm(t, c, url)

	// Background load with loose targets keeps both models fed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for i := range 2 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if resp, raw, _, err := sloTry(url, fmt.Sprintf("background %d %d", i, n), 6, 60_000, 60_000); err != nil || resp.StatusCode != http.StatusOK {
					t.Errorf("a background request: %v %s", err, raw)
					return
				}
			}
		})
	}
	ttftOf := func(i int) float64 {
		if p := c.r.UpstreamStatus(c.fleet.upstreams[i], 0).Predicted; p != nil {
			return p.TTFTMs
		}
		return 0
	}
	slowed := c.fleet.upstreams[1].addr
	slow(t, "http://"+slowed, 3*time.Millisecond, 60*time.Millisecond)
	begin := time.Now()
	for ttftOf(1) < 3*ttftOf(0) || ttftOf(0) == 0 {
		if time.Since(begin) > 10*time.Second {
			t.Fatalf("10 s after the slowdown the slowed engine's predicted TTFT is %.1f ms, the other's %.1f ms", ttftOf(1), ttftOf(0))
		}
		time.Sleep(20 * time.Millisecond) // polling the status
	}
	t.Logf("predicted TTFT followed in %v: %.1f ms against %.1f ms", time.Since(begin).Round(time.Millisecond), ttftOf(1), ttftOf(0))

	prompt := "a tight target moves the request to the faster engine"
	want := c.complete(c.engines[0], greedy(prompt, 8))
	for range 20 {
		resp, raw, text := sloPost(t, url, prompt, 8, int(tight.TTFT.Milliseconds()), int(tight.TPOT.Milliseconds()))
		if resp.StatusCode != http.StatusOK || text != want {
			t.Fatalf("a request with tight targets: %s %s, text %q, want %q", resp.Status, raw, text, want)
		}
	}
	toSlow, toFast := picks.count(slowed), picks.count(c.fleet.upstreams[0].addr)
	if toSlow*4 > toFast {
		t.Fatalf("after the slowdown the slowed engine took %d of the tight requests, the other %d: they did not move", toSlow, toFast)
	}
}

// pickCounter is SLOAware counting where it sends the requests of
// targets of.
type pickCounter struct {
	SLOAware
	of Targets
	mu sync.Mutex
	n  map[string]int
}

func (p *pickCounter) Choose(req *Request, cands []Candidate) int {
	i := p.SLOAware.Choose(req, cands)
	if req.Targets == p.of && i >= 0 && i < len(cands) {
		p.mu.Lock()
		p.n[cands[i].Addr]++
		p.mu.Unlock()
	}
	return i
}

func (p *pickCounter) count(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[addr]
}
