package caddymlc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t testing.TB, n int) []int { return testnet.FreePorts(t, n) }

// site is a running Caddy config with an mlc_router.
type site struct {
	t       testing.TB
	base    string   // the router's base URL
	engines []string // the engines' base URLs
	client  *http.Client
}

// startSite loads a Caddyfile in this process: %[1]d is the HTTP port, %[2]s
// the endpoint lines, %[3]s extra router options.
func startSite(t testing.TB, engines int, routerOpts string) *site {
	t.Helper()
	return startSiteModel(t, "tiny", engines, routerOpts)
}

// startSiteModel is startSite for another model.
func startSiteModel(t testing.TB, model string, engines int, routerOpts string) *site {
	t.Helper()
	ports := freePorts(t, engines+1)
	var eps strings.Builder
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	for _, p := range ports[1:] {
		fmt.Fprintf(&eps, "\t\t\tendpoint 127.0.0.1:%d\n", p)
		s.engines = append(s.engines, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	cf := fmt.Sprintf(`{
	admin off
	auto_https off
	skip_install_trust
}
http://127.0.0.1:%d {
	route {
		mlc_router {
			model %q
%s%s		}
		respond "next handler" 418
	}
}
`, ports[0], model, eps.String(), routerOpts)
	loadCaddyfile(t, cf)
	return s
}

func loadCaddyfile(t testing.TB, cf string) {
	t.Helper()
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cf)
	}
	for _, w := range warnings {
		t.Logf("adapt warning: %s", w.Message)
	}
	loadConfig(t, cfg)
	t.Cleanup(func() { stopCaddy(t) })
}

// stopCaddy stops the running config and waits until its engines, which
// drain in the background, have stopped.
func stopCaddy(t testing.TB) {
	t.Helper()
	old := runningFleets()
	if err := caddy.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	waitDrained(t, old)
}

// complete posts a non-streaming completion and returns the response.
func (s *site) complete(url string, body map[string]any) (*protocol.CompletionResponse, int, []byte) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := s.client.Post(url+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, resp.StatusCode, raw
	}
	var out protocol.CompletionResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%v: %s", err, raw)
	}
	return &out, resp.StatusCode, raw
}

// streamed is what a client saw of a streamed completion.
type streamed struct {
	text    string
	finish  string
	usage   *protocol.Usage
	done    bool
	errBody *protocol.Error
	chunks  int
	raw     []string
	// firstAfter is the time from the request to its first text.
	firstAfter time.Duration
}

// stream posts a streaming completion and reads it to the end.
func (s *site) stream(ctx context.Context, url string, body map[string]any) (streamed, error) {
	body["stream"] = true
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(b))
	begin := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return streamed{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		return streamed{}, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	return readStream(resp.Body, begin)
}

func readStream(r io.Reader, begin time.Time) (streamed, error) {
	return readStreamHook(r, begin, nil)
}

// readStreamHook reads a stream, calling afterText (if set) after each
// chunk that carried text.
func readStreamHook(r io.Reader, begin time.Time, afterText func()) (streamed, error) {
	var out streamed
	sse := protocol.NewSSEReader(r, 0)
	for {
		data, err := sse.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.raw = append(out.raw, string(data))
		if out.done {
			return out, fmt.Errorf("event after [DONE]: %s", data)
		}
		if protocol.IsDone(data) {
			out.done = true
			continue
		}
		if e := protocol.ParseError(0, data); e != nil {
			out.errBody = e
			continue
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			return out, err
		}
		out.chunks++
		if chunk.Usage != nil {
			out.usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			if c.Text != "" && out.firstAfter == 0 {
				out.firstAfter = time.Since(begin)
			}
			out.text += c.Text
			if r := c.Finished(); r != "" {
				out.finish = r
			}
			if c.Text != "" && afterText != nil {
				afterText()
			}
		}
	}
}

// engineMetrics asks an engine for its metrics (query_engine_metrics).
func engineMetrics(t testing.TB, engineURL string) map[string]float64 {
	t.Helper()
	body := `{"prompt":[1],"max_tokens":1,"debug_config":{"special_request":"query_engine_metrics"}}`
	resp, err := http.Post(engineURL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Usage == nil {
		t.Fatalf("engine metrics: %v %+v", err, out)
	}
	m := map[string]float64{}
	for k, v := range out.Usage.Extra {
		var f float64
		if json.Unmarshal(v, &f) == nil {
			m[k] = f
		}
	}
	return m
}

// waitFor polls cond (an engine's state, observed over HTTP) until it holds
// or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// Generous: what it waits for is often engines starting, which on a
	// loaded 2-core machine under -race takes tens of seconds.
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func timeNow() time.Time { return time.Now() }

var insecureTLS = &tls.Config{InsecureSkipVerify: true}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func httpClient() *http.Client { return &http.Client{Timeout: 2 * time.Minute} }

// events returns the data of a stream's events but [DONE], and whether
// the stream ended with [DONE].
func events(t *testing.T, raw []byte) ([][]byte, bool) {
	t.Helper()
	var out [][]byte
	sse := protocol.NewSSEReader(bytes.NewReader(raw), 0)
	for {
		data, err := sse.Next()
		if err == io.EOF {
			return out, false
		}
		if err != nil {
			t.Fatalf("%v in %s", err, raw)
		}
		if protocol.IsDone(data) {
			return out, true
		}
		out = append(out, bytes.Clone(data))
	}
}

// streamExact streams body through base and checks that the stream ends
// well with want; onText runs at its first text (and, for a stream that
// carried none, when it ends).
// exactStreams starts a stream through base for each body, checked
// against want (streamExact), and returns once each has had text; finish
// waits for them all and reports the failures.
func (s *site) exactStreams(base string, bodies []map[string]any, want []string) (finish func()) {
	var started, wg sync.WaitGroup
	started.Add(len(bodies))
	errs := make(chan error, len(bodies))
	for i, body := range bodies {
		wg.Go(func() {
			if err := s.streamExact(base, body, want[i], sync.OnceFunc(started.Done)); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}
	started.Wait()
	return func() {
		s.t.Helper()
		wg.Wait()
		close(errs)
		for err := range errs {
			s.t.Error(err)
		}
	}
}

func (s *site) streamExact(base string, body map[string]any, want string, onText func()) error {
	defer onText()
	body["stream"] = true
	resp, err := s.client.Post(base+"/v1/completions", "application/json", strings.NewReader(mustJSON(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	st, err := readStreamHook(resp.Body, time.Now(), onText)
	if err != nil || st.text != want || !st.done || st.errBody != nil {
		return fmt.Errorf("err %v done %v error %v\n got  %q\n want %q", err, st.done, st.errBody, st.text, want)
	}
	return nil
}

// loadConfig loads cfg into the process's Caddy, first or as a reload. A
// reload's old servers close their idle keep-alive connections, and Go's
// client does not retry a POST sent on one as it closes (EOF): the
// tests' clients drop them, as a client that reconnects after a reload
// would.
func loadConfig(t testing.TB, cfg []byte) {
	t.Helper()
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("load: %v\n%s", err, cfg)
	}
	http.DefaultClient.CloseIdleConnections()
}
