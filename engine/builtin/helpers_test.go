package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// TestMain lets the test binary double as the engine program:
// `<test binary> mlc-engine <model> [flags]`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mlc-engine" {
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// testEngine is an engine running in the test process behind httptest.
type testEngine struct {
	t      testing.TB
	e      *Engine
	url    string
	client *http.Client
}

// newTestEngine starts an in-process engine for the tiny model with
// --enable-debug and the given overrides. After the test it checks that
// no KV page is left in use and no goroutine is left behind.
func newTestEngine(t testing.TB, overrides string, disagg bool, args ...string) *testEngine {
	t.Helper()
	return newTestEngineModel(t, TinyModel, overrides, disagg, args...)
}

// newTestEngineModel is newTestEngine for another model.
func newTestEngineModel(t testing.TB, model, overrides string, disagg bool, args ...string) *testEngine {
	t.Helper()
	before := runtime.NumGoroutine()
	opts, err := ParseArgs(append([]string{model, "--enable-debug", "--mode", "server", "--overrides", overrides}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(opts, disagg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, loaded := leakChecked.LoadOrStore(t, true); !loaded {
		// Registered before any engine's cleanup, so it runs after all.
		t.Cleanup(func() { leakChecked.Delete(t); checkGoroutines(t, before) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	go e.Run(ctx)
	var w *world
	if disagg {
		w = &world{NVSHMEMConfig: protocol.NVSHMEMConfig{NPEs: 1}}
	}
	srv := httptest.NewServer(newServer(e, w).handler())
	te := &testEngine{t: t, e: e, url: srv.URL, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(func() {
		te.checkIdle()
		te.client.CloseIdleConnections()
		srv.Close()
		cancel()
		<-e.Done()
	})
	return te
}

// leakChecked holds the tests whose goroutine check is registered.
var leakChecked sync.Map

// checkIdle fails the test when pages are still used or requests remain.
func (te *testEngine) checkIdle() {
	te.t.Helper()
	m := te.waitMetrics(func(m Metrics) bool { return m.Running+m.Waiting+m.Prepared == 0 && m.Pages.Used == 0 })
	if m.Pages.Used+m.Pages.Cached+m.Pages.Free != m.Pages.Total {
		te.t.Errorf("pages do not add up: %+v", m.Pages)
	}
}

// waitMetrics polls the engine's metrics until cond holds (the scheduler
// frees pages asynchronously after a client goes away) and returns them.
func (te *testEngine) waitMetrics(cond func(Metrics) bool) Metrics {
	te.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := te.e.Metrics()
		if err != nil {
			te.t.Fatal(err)
		}
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			te.t.Fatalf("engine did not settle: %+v", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkGoroutines fails when more goroutines run than before the test,
// once transient ones have had a chance to end.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("goroutine leak: %d running, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// post sends a JSON body and returns the status and body.
func post(t testing.TB, c *http.Client, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// result is a completion reduced to what tests compare.
type result struct {
	texts   []string
	finish  []string
	usage   *protocol.Usage
	chunks  int
	rawDone bool
}

// complete runs a completion at path on base (streamed or not, as req
// says) and fails the test on an error status.
func complete(t testing.TB, c *http.Client, base, path string, req any) result {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, body)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return readStream(t, resp.Body)
	}
	var cr protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil {
		t.Fatal(err)
	}
	var r result
	for _, c := range cr.Choices {
		r.texts = append(r.texts, c.Text)
		r.finish = append(r.finish, c.Finished())
	}
	r.usage = cr.Usage
	return r
}

// completeAsync runs complete in a goroutine and sends its result. A
// failure there fails the test and ends the goroutine (goTB), which still
// sends (a zero result), so the test goroutine waiting on it goes on.
func completeAsync(t testing.TB, c *http.Client, base, path string, req any) <-chan result {
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() { done <- r }()
		r = complete(goTB{t}, c, base, path, req)
	}()
	return done
}

// readStream collects a completion stream.
func readStream(t testing.TB, body io.Reader) result {
	t.Helper()
	var r result
	sr := protocol.NewSSEReader(body, 0)
	for {
		data, err := sr.Next()
		if err == io.EOF {
			return r
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.rawDone {
			t.Fatal("data after [DONE]")
		}
		if protocol.IsDone(data) {
			r.rawDone = true
			continue
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatal(err)
		}
		r.chunks++
		if chunk.Usage != nil {
			r.usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			for len(r.texts) <= c.Index {
				r.texts = append(r.texts, "")
				r.finish = append(r.finish, "")
			}
			r.texts[c.Index] += c.Text
			if f := c.Finished(); f != "" {
				r.finish[c.Index] = f
			}
		}
	}
}

// greedy returns a greedy completion request.
func greedy(prompt any, maxTokens int) map[string]any {
	return map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
}

// with returns a copy of m with more fields.
func with(m map[string]any, kv ...any) map[string]any {
	c := map[string]any{}
	maps.Copy(c, m)
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// extraInt reads an integer of usage.extra.
func extraInt(t testing.TB, u *protocol.Usage, key string) int {
	t.Helper()
	if u == nil || u.Extra[key] == nil {
		t.Fatalf("usage.extra has no %s: %+v", key, u)
	}
	var n int
	if err := json.Unmarshal(u.Extra[key], &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// prompts returns n varied prompts of lengths from 1 to about 300 words.
func prompts(n int) []string {
	words := strings.Fields("the quick brown fox jumps over the lazy dog while people watch from the river bank and talk about music science and the old city")
	out := make([]string, n)
	for i := range out {
		length := 1 + (i*37)%300
		var b strings.Builder
		for j := range length {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[(i*7+j*j+j)%len(words)])
			if (i+j)%17 == 16 {
				b.WriteString(".")
			}
		}
		out[i] = fmt.Sprintf("%s %d", b.String(), i)
	}
	return out
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// goTB lets the helpers run on goroutines other than the test's: Fatal
// records the failure and ends only the calling goroutine.
type goTB struct{ testing.TB }

// Fatal reports the failure and ends the calling goroutine.
func (g goTB) Fatal(args ...any) {
	g.TB.Helper()
	g.TB.Error(args...)
	runtime.Goexit()
}

// Fatalf reports the failure and ends the calling goroutine.
func (g goTB) Fatalf(format string, args ...any) {
	g.TB.Helper()
	g.TB.Errorf(format, args...)
	runtime.Goexit()
}

// beforeToken returns the text of the tokens of text (generated by the
// tiny model, whose tokenization of generated text is canonical) that end
// at or before byte at: what MLC's engine keeps of text in which a stop
// string begins at at.
func beforeToken(t testing.TB, text string, at int) string {
	t.Helper()
	end := 0
	for _, id := range tiny.New().Encode(text) {
		n := len(tiny.New().Token(id))
		if end+n > at {
			return text[:end]
		}
		end += n
	}
	t.Fatalf("byte %d is beyond %q", at, text)
	return ""
}

// midStop returns a stop string that spans two tokens of text, starting
// inside a word, and first occurs after the first token.
func midStop(t testing.TB, text string) string {
	t.Helper()
	words := strings.Fields(text)
	for i := 1; i+1 < len(words); i++ {
		if len(words[i]) < 2 {
			continue
		}
		stop := words[i][1:] + " " + words[i+1][:1]
		if beforeToken(t, text, strings.Index(text, stop)) != "" {
			return stop
		}
	}
	t.Fatalf("no stop string in the middle of %q", text)
	return ""
}
