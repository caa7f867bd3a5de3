package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/browsertest"
)

// fleetPageOrigins is the admin block's origins line docs/operations.md
// gives for the fleet page: the endpoint's own names, and "" for the
// address bar (a navigation sends no Origin).
const fleetPageOrigins = `origins 127.0.0.1:%[1]d localhost:%[1]d ""`

// adminBlock is the global options of a Caddy whose admin endpoint listens
// on port, with origins (a line of the admin block, or "").
func adminBlock(port int, origins string) string {
	if origins != "" {
		origins = fmt.Sprintf("\t\t"+origins+"\n", port)
	}
	return fmt.Sprintf("{\n\tadmin 127.0.0.1:%d {\n%s\t}\n\tauto_https off\n\tskip_install_trust\n}\n", port, origins)
}

// adminRequest makes a request of the admin endpoint with headers (name,
// value pairs) and returns its status, content type and body.
func adminRequest(t *testing.T, method, url string, headers ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// external finds what would make the page load something from elsewhere:
// a URL with a scheme, an element that loads a resource, a CSS import.
var external = regexp.MustCompile(`(?i)https?:|\bsrc\s*=|<link|@import|url\(`)

// GET /mlc/ on Caddy's admin endpoint is the embedded page, whole and
// self-contained; other paths under /mlc/ are not it. A browser's
// navigation (Sec-Fetch-Mode, no Origin) is refused by the default
// origins and served with the documented ones, which still refuse a
// cross-site drain.
func TestFleetPageRoute(t *testing.T) {
	onDisk, err := os.ReadFile("fleetpage/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != fleetPageHTML {
		t.Fatal("the embedded page is not fleetpage/index.html")
	}
	if m := external.FindString(fleetPageHTML); m != "" {
		t.Fatalf("the page loads something from elsewhere: %q", m)
	}
	navigate := []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Site", "none", "Sec-Fetch-Dest", "document"}
	t.Run("default origins", func(t *testing.T) {
		port := freePorts(t, 1)[0]
		loadCaddyfile(t, adminBlock(port, ""))
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		status, ctype, body := adminRequest(t, http.MethodGet, base+"/mlc/")
		if status != http.StatusOK || ctype != "text/html; charset=utf-8" || body != fleetPageHTML {
			t.Fatalf("GET /mlc/: %d %q, %d bytes, want 200 text/html and the page", status, ctype, len(body))
		}
		for _, path := range []string{"/mlc/index.html", "/mlc/x"} {
			if status, _, _ := adminRequest(t, http.MethodGet, base+path); status != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", path, status)
			}
		}
		if status, _, body := adminRequest(t, http.MethodGet, base+"/mlc/", navigate...); status != http.StatusForbidden {
			t.Errorf("a navigation without the documented origins: %d %s, want 403 (is the \"\" origin still needed?)", status, body)
		}
	})
	t.Run("documented origins", func(t *testing.T) {
		port := freePorts(t, 1)[0]
		loadCaddyfile(t, adminBlock(port, fleetPageOrigins))
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		if status, _, body := adminRequest(t, http.MethodGet, base+"/mlc/", navigate...); status != http.StatusOK || body != fleetPageHTML {
			t.Errorf("a navigation: %d, %d bytes", status, len(body))
		}
		if status, _, _ := adminRequest(t, http.MethodPost, base+"/mlc/engines/127.0.0.1:1/drain",
			"Origin", "http://attacker.example", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Site", "cross-site"); status != http.StatusForbidden {
			t.Errorf("a cross-site drain: %d, want 403", status)
		}
		if status, _, _ := adminRequest(t, http.MethodPost, base+"/mlc/engines/127.0.0.1:1/drain",
			"Origin", base, "Sec-Fetch-Mode", "cors", "Sec-Fetch-Site", "same-origin"); status != http.StatusNotFound {
			t.Errorf("a same-origin drain of an unknown engine: %d, want 404", status)
		}
	})
}

// counterOf sums the samples of the counter name in Prometheus text whose
// labels include every one of labels (`key="value"`).
func counterOf(text, name string, labels ...string) float64 {
	sum := 0.0
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if f := strings.Fields(line); ok && len(f) >= 2 {
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// The main job's shape (two built-in engines, disaggregated; policy
// prefix_aware, for a prefix hit rate) with the fleet page open in
// Chromium: the page shows both engines with their roles and states and
// the decode engine's prefix hit rate as /metrics has it (and its
// Prometheus parser reads escaped labels); its drain button drains the
// engine and the page shows it, its undrain button puts it back, its
// rolling restart restarts both engines and the page's events say so; the
// page reports no console error throughout. With CADDY_MLC_SCREENSHOT=file,
// a screenshot of the page is written there (docs/fleet-page.png).
func TestFleetPageInChromium(t *testing.T) {
	browsertest.Chromium(t)
	ports := freePorts(t, 4)
	adminPort, port := ports[0], ports[1]
	prefill, decode := fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[3])
	loadCaddyfile(t, adminBlock(adminPort, fleetPageOrigins)+fmt.Sprintf(`http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode disagg
		policy prefix_aware
		endpoint %s
		endpoint %s
		default_max_tokens 512
	}
}
`, port, prefill, decode))
	admin := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port), client: httpClient()}
	for range 2 { // the second finds the first's pages on the decode engine
		if _, status, raw := s.complete(s.base, greedy("the lighthouse keeper counted the ships that passed his rock every night", 8)); status != http.StatusOK {
			t.Fatalf("completion: %d %s", status, raw)
		}
	}
	_, _, metrics := adminRequest(t, http.MethodGet, admin+"/metrics")
	engine := `engine="` + decode + `"`
	hit, prompt := counterOf(metrics, "caddy_mlc_prefix_hit_tokens_total", engine), counterOf(metrics, "caddy_mlc_prefix_prompt_tokens_total", engine)
	if hit <= 0 || prompt <= hit {
		t.Fatalf("decode engine's prefix tokens: %v hit of %v", hit, prompt)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := browsertest.New(t, ctx, 1280, 720)
	p := fleetPageDriver{t: t, tab: b.Tab}
	p.do(chromedp.Navigate(admin + "/mlc/"))
	row := func(addr, field string) string { return fmt.Sprintf(`tr[data-engine=%q] [data-field=%q]`, addr, field) }
	for addr, role := range map[string]string{prefill: "prefill", decode: "decode"} {
		p.waitText(row(addr, "state"), "ready")
		p.waitText(row(addr, "role"), role)
		p.waitText(row(addr, "drain"), "in rotation")
	}
	shown := strings.TrimSuffix(p.text(row(decode, "prefix-hit")), "%")
	if v, err := strconv.ParseFloat(shown, 64); err != nil || math.Abs(v-100*hit/prompt) > 0.5001 {
		t.Errorf("the page shows a prefix hit rate of %q%%, /metrics %.1f%%", shown, 100*hit/prompt)
	}
	// What the engine reused of its cache beside what the router expected
	// it to hold: the second completion found the first's pages.
	c := engineStatus(t, admin, decode).Cache
	if c == nil || c.Reused <= 0 || c.Expected <= 0 {
		t.Fatalf("/mlc/engines: the decode engine's cache accounting %+v, want tokens expected and reused", c)
	}
	p.waitText(row(decode, "cache"), fmt.Sprintf("%d / %d", c.Reused, c.Expected))

	p.checkParser()

	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="drain"][data-engine=%q]`, decode))))
	p.waitText(row(decode, "drain"), fleet.DrainDrained)
	if st := engineDrain(t, admin, decode); st != fleet.DrainDrained {
		t.Fatalf("the page shows the engine drained, /mlc/engines %q", st)
	}
	p.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="undrain"][data-engine=%q]`, decode))))
	p.waitText(row(decode, "drain"), "in rotation")
	if st := engineDrain(t, admin, decode); st != "" {
		t.Fatalf("the page shows the engine in rotation, /mlc/engines %q", st)
	}
	if path := os.Getenv("CADDY_MLC_SCREENSHOT"); path != "" {
		p.screenshot(s, decode, path)
	}

	before := enginePIDs(t, admin)
	restart := chromedp.CSS(`button[data-action="restart"][data-model="tiny"]`)
	p.do(chromedp.Click(restart)) // arms it
	p.waitText(`button[data-action="restart"][data-model="tiny"]`, "confirm restart")
	p.do(chromedp.Click(restart))
	p.waitText(`section[data-model="tiny"] [data-field="roll"]`, "rolling restart done: 2/2 restarted")
	for addr, pid := range enginePIDs(t, admin) {
		if pid == before[addr] {
			t.Errorf("engine %s runs the same process (%d) after the rolling restart", addr, pid)
		}
	}
	for _, addr := range []string{prefill, decode} {
		p.waitText(row(addr, "state"), "ready")
	}
	p.waitContains("#events", decode+": restarted (1 so far)") // the page's recent events
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// fleetPageDriver runs chromedp actions in a tab, failing the test on an
// error.
type fleetPageDriver struct {
	t   *testing.T
	tab context.Context
}

func (p fleetPageDriver) do(a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.tab, a); err != nil {
		p.t.Fatal(err)
	}
}

// text is the text content of the first element sel selects, "" for none.
func (p fleetPageDriver) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.tab, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel)))
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// waitContains waits until the first element sel selects has a text
// content that contains want.
func (p fleetPageDriver) waitContains(sel, want string) {
	p.t.Helper()
	p.poll(fmt.Sprintf(`document.querySelector(%q)?.textContent.includes(%q)`, sel, want), sel, "contain "+strconv.Quote(want))
}

// waitText waits until the first element sel selects has the text
// content want (the page refreshes itself every 2 s).
func (p fleetPageDriver) waitText(sel, want string) {
	p.t.Helper()
	p.poll(fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, sel, want), sel, "read "+strconv.Quote(want))
}

// poll waits, a minute at most, until the page's expression expr is true:
// that sel's text content does what.
func (p fleetPageDriver) poll(expr, sel, what string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.tab, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		p.t.Fatalf("waiting for %s to %s (it reads %q): %v", sel, what, p.text(sel), err)
	}
}

// screenshot writes a PNG of the page to path while streams run on the
// engines (the page shows them in flight), then ends the streams.
func (p fleetPageDriver) screenshot(s *site, decode, path string) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, _ = s.stream(ctx, s.base, greedy(fmt.Sprintf("the %d keepers of the winter light", i), 4000))
		})
	}
	defer wg.Wait()
	defer cancel()
	p.waitText(fmt.Sprintf(`tr[data-engine=%q] [data-field="in-flight"]`, decode), "3")
	png, err := chromedp.Run(p.tab, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// checkParser has the page read Prometheus text whose label values hold
// the format's escapes and its separators (a tenant is a client's header).
func (p fleetPageDriver) checkParser() {
	p.t.Helper()
	const text = "# HELP x y\n" +
		`caddy_mlc_rate_limited_total{tenant="a\"b,c}=d\\",limit="tokens"} 3` + "\n" +
		"caddy_mlc_queued_requests 2.5e+00\n" +
		`caddy_mlc_queue_wait_seconds_bucket{le="+Inf"} 7 1700000000000` + "\n"
	got, err := chromedp.Run(p.tab, chromedp.Evaluate[string](fmt.Sprintf(`JSON.stringify(parseProm(%q))`, text)))
	if err != nil {
		p.t.Fatal(err)
	}
	const want = `[{"name":"caddy_mlc_rate_limited_total","labels":{"tenant":"a\"b,c}=d\\","limit":"tokens"},"value":3},` +
		`{"name":"caddy_mlc_queued_requests","labels":{},"value":2.5},` +
		`{"name":"caddy_mlc_queue_wait_seconds_bucket","labels":{"le":"+Inf"},"value":7}]`
	if got != want {
		p.t.Errorf("the page parses Prometheus text as\n%s\nwant\n%s", got, want)
	}
}

// engineStatus is the engine at addr as /mlc/engines shows it.
func engineStatus(t *testing.T, admin, addr string) fleet.EngineStatus {
	t.Helper()
	_, _, body := adminRequest(t, http.MethodGet, admin+"/mlc/engines")
	var st []fleet.ModelStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st {
		for _, e := range r.Engines {
			if e.Addr == addr {
				return e
			}
		}
	}
	t.Fatalf("no engine %s in /mlc/engines", addr)
	return fleet.EngineStatus{}
}
