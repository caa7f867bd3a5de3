package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// rig is Caddy running two routers over real built-in engines: the one
// under test, and a reference with one engine of its own that nothing
// disturbs, whose answers are the oracle.
type rig struct {
	t      *testing.T
	base   string // the router under test
	ref    string // the reference router
	refEng string // the reference router's engine, host:port
	admin  string
	client *http.Client

	goroutines int          // goroutines once serving, before the faults
	children   map[int]bool // this process's children before Caddy started
	// config makes the Caddyfile with the endpoint lines of the router
	// under test (reload loads another).
	config func(endpoints string) string
}

// rigConfig is the router under test: the options of its spawned
// endpoints (one each, e.g. "role decode"; the rig picks the ports),
// endpoints the test runs itself ("host:port external ..."), and more
// router options.
type rigConfig struct {
	endpoints  []string
	external   []string
	routerOpts string
}

// newRig starts Caddy with the router of cfg and the reference router,
// and stops it (checking that no engine is left) when the test ends.
func newRig(t *testing.T, cfg rigConfig) *rig {
	t.Helper()
	ports := testnet.FreePorts(t, 4+len(cfg.endpoints))
	r := &rig{t: t, children: enginetest.Children(t),
		base:   fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		ref:    fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		admin:  fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		refEng: fmt.Sprintf("127.0.0.1:%d", ports[3]),
		client: &http.Client{Timeout: 5 * time.Minute,
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 512}},
	}
	var eps strings.Builder
	for i, ep := range cfg.endpoints {
		fmt.Fprintf(&eps, "\t\tendpoint 127.0.0.1:%d %s\n", ports[4+i], ep)
	}
	for _, ep := range cfg.external {
		fmt.Fprintf(&eps, "\t\tendpoint %s\n", ep)
	}
	r.config = func(endpoints string) string {
		return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	log {
		level %s
	}
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
%s%s	}
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		endpoint 127.0.0.1:%d
	}
}
`, ports[2], logLevel(), ports[0], endpoints, cfg.routerOpts, ports[1], ports[3])
	}
	if err := r.load(eps.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	// Warm up (connections, the engines' first requests) before the
	// goroutine baseline is taken.
	for _, base := range []string{r.base, r.ref} {
		if res := r.do(context.Background(), job{prompt: "warm up", maxTokens: 2}, base); res.err != "" {
			t.Fatalf("warm-up request to %s: %s", base, res.err)
		}
	}
	r.client.CloseIdleConnections()
	r.goroutines = countGoroutines()
	return r
}

// load loads the rig's config with these endpoint lines for the router
// under test: the first load, or a reload.
func (r *rig) load(endpoints string) error {
	cf := r.config(endpoints)
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		return fmt.Errorf("adapt: %w\n%s", err, cf)
	}
	if err := caddy.Load(adapted, true); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// logLevel is Caddy's log level in the suite: ERROR, or what
// CADDY_MLC_CHAOS_LOG says (DEBUG shows every retry and its cause).
func logLevel() string {
	if l := os.Getenv("CADDY_MLC_CHAOS_LOG"); l != "" {
		return l
	}
	return "ERROR"
}

// stop stops Caddy and waits until every engine process it started is
// gone.
func (r *rig) stop() {
	if err := caddy.Stop(); err != nil {
		r.t.Errorf("stop: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var stray []int
		for pid := range enginetest.Children(r.t) {
			if !r.children[pid] {
				stray = append(stray, pid)
			}
		}
		if len(stray) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Errorf("engine processes left after Caddy stopped: %v", stray)
			return
		}
		time.Sleep(50 * time.Millisecond) // engines drain, then stop; nothing to wait on from here
	}
}

// job is one client request.
type job struct {
	chat      bool
	stream    bool
	prompt    string
	maxTokens int
}

func (j job) body() []byte {
	m := map[string]any{"max_tokens": j.maxTokens, "temperature": 0, "stream": j.stream}
	if j.chat {
		m["messages"] = []map[string]string{{"role": "user", "content": j.prompt}}
	} else {
		m["prompt"] = j.prompt
	}
	b, _ := json.Marshal(m)
	return b
}

func (j job) path() string {
	if j.chat {
		return protocol.PathChatCompletions
	}
	return protocol.PathCompletions
}

// result is what a client got.
type result struct {
	text   string
	err    string        // "" when the request completed
	status int           // HTTP status
	stall  time.Duration // the longest wait for the next piece of text, first included
	took   time.Duration
	// ttft is the wait for the first piece of text; gap the longest
	// wait between two pieces, and gapAt when it began.
	ttft, gap time.Duration
	begin     time.Time
	gapAt     time.Time
}

// do sends j to base, reads the answer to its end and times it.
func (r *rig) do(ctx context.Context, j job, base string) result {
	begin := time.Now()
	res := r.send(ctx, j, base, begin)
	res.begin = begin
	if res.ttft == 0 {
		res.ttft = res.took // no text: the whole wait counts as the first one
	}
	return res
}

// send sends j to base and reads the answer to its end.
func (r *rig) send(ctx context.Context, j job, base string, begin time.Time) result {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+j.path(), bytes.NewReader(j.body()))
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return result{err: err.Error(), took: time.Since(begin), stall: time.Since(begin)}
	}
	defer resp.Body.Close()
	res := result{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || !j.stream {
		raw, err := io.ReadAll(resp.Body)
		res.took, res.stall = time.Since(begin), time.Since(begin)
		switch {
		case err != nil:
			res.err = err.Error()
		case resp.StatusCode != http.StatusOK:
			res.err = fmt.Sprintf("status %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
		default:
			var err error
			if res.text, err = wholeText(j.chat, raw); err != nil {
				res.err = err.Error()
			}
		}
		return res
	}
	last := begin
	sse := protocol.NewSSEReader(resp.Body, 0)
	done := false
	for {
		data, err := sse.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.err = err.Error()
			break
		}
		if protocol.IsDone(data) {
			done = true
			continue
		}
		if e := protocol.ParseError(0, data); e != nil {
			res.err = "error event: " + e.Message
			break
		}
		piece, err := chunkText(j.chat, data)
		if err != nil {
			res.err = err.Error()
			break
		}
		if piece != "" {
			now := time.Now()
			wait := now.Sub(last)
			res.stall = max(res.stall, wait)
			if res.text == "" && res.ttft == 0 {
				res.ttft = wait
			} else if wait > res.gap {
				res.gap, res.gapAt = wait, last
			}
			last = now
			res.text += piece
		}
	}
	res.took = time.Since(begin)
	if res.err == "" && !done {
		res.err = "stream ended without [DONE]"
	}
	return res
}

func wholeText(chat bool, raw []byte) (string, error) {
	var out struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) != 1 {
		return "", fmt.Errorf("bad answer %s", raw)
	}
	if chat {
		return out.Choices[0].Message.Content, nil
	}
	return out.Choices[0].Text, nil
}

func chunkText(chat bool, data []byte) (string, error) {
	var out struct {
		Choices []struct {
			Text  string `json:"text"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("bad chunk %s", data)
	}
	var s strings.Builder
	for _, c := range out.Choices {
		s.WriteString(c.Text + c.Delta.Content)
	}
	return s.String(), nil
}

// references returns the reference text of every job, from the
// undisturbed reference router (as a whole answer: the text does not
// depend on streaming).
func (r *rig) references(jobs []job) []string {
	r.t.Helper()
	refs := make([]string, len(jobs))
	for i, j := range jobs {
		j.stream = false
		res := r.do(context.Background(), j, r.ref)
		if res.err != "" {
			r.t.Fatalf("reference %d: %s", i, res.err)
		}
		refs[i] = res.text
	}
	return refs
}

// tally collects the outcome of a scenario's requests.
type tally struct {
	mu        sync.Mutex
	requests  int
	completed int
	errors    []string
	worst     time.Duration // the longest wait of any request, first text included
	// worstTTFT and worstGap split it: the longest wait for a first
	// text, and between two texts of a stream.
	worstTTFT, worstGap time.Duration
	long                []longWait // waits over longWaitReported
}

// longWait is one wait over longWaitReported, for the report: when it
// began and how long it was.
type longWait struct {
	at    time.Time
	wait  time.Duration
	first bool // a first text's wait (TTFT), else a gap in a stream
}

// longWaitReported is the wait a scenario's report lists one by one.
const longWaitReported = time.Second

// add records res of a request whose undisturbed text is want.
func (ta *tally) add(res result, want string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.requests++
	ta.worst = max(ta.worst, res.stall)
	ta.worstTTFT = max(ta.worstTTFT, res.ttft)
	ta.worstGap = max(ta.worstGap, res.gap)
	if res.ttft > longWaitReported {
		ta.long = append(ta.long, longWait{at: res.begin, wait: res.ttft, first: true})
	}
	if res.gap > longWaitReported {
		ta.long = append(ta.long, longWait{at: res.gapAt, wait: res.gap})
	}
	switch {
	case res.err != "":
		ta.errors = append(ta.errors, res.err)
	case res.text != want:
		ta.errors = append(ta.errors, fmt.Sprintf("text differs: got %.80q..., want %.80q...", res.text, want))
	default:
		ta.completed++
	}
}

// report prints the scenario's summary line and fails on any error.
func (ta *tally) report(t *testing.T, name string) {
	t.Helper()
	fmt.Printf("chaos %s: requests=%d completed=%d errors=%d worst_stall=%v (ttft %v, gap %v) waits_over_%v=%d\n",
		name, ta.requests, ta.completed, len(ta.errors), ta.worst.Round(time.Millisecond),
		ta.worstTTFT.Round(time.Millisecond), ta.worstGap.Round(time.Millisecond), longWaitReported, len(ta.long))
	if testing.Verbose() {
		slices.SortFunc(ta.long, func(a, b longWait) int { return a.at.Compare(b.at) })
		for _, w := range ta.long {
			what := "gap"
			if w.first {
				what = "ttft"
			}
			t.Logf("%s %v from %s", what, w.wait.Round(time.Millisecond), w.at.Format("15:04:05.000"))
		}
	}
	if len(ta.errors) > 0 {
		t.Fatalf("%d of %d requests failed; first: %s", len(ta.errors), ta.requests, ta.errors[0])
	}
	if ta.requests == 0 {
		t.Fatal("no request ran")
	}
}

// engineStatus is one engine of GET /mlc/engines.
type engineStatus struct {
	Addr     string `json:"addr"`
	Role     string `json:"role"`
	State    string `json:"state"`
	PID      int    `json:"pid"`
	InFlight int64  `json:"in_flight"`
	Breaker  string `json:"breaker"`
}

type routerStatus struct {
	Queued  int64          `json:"queued"`
	Engines []engineStatus `json:"engines"`
}

// status returns the router under test's engines (the reference router
// is the one with a single round_robin engine).
func (r *rig) status() routerStatus {
	r.t.Helper()
	resp, err := http.Get(r.admin + "/mlc/engines")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var all []routerStatus
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		r.t.Fatal(err)
	}
	for _, rs := range all {
		if rs.Engines[0].Addr != r.refEng {
			return rs
		}
	}
	r.t.Fatalf("router under test not found in %+v", all)
	return routerStatus{}
}

// waitEngine waits until engine i is ready (with a process).
func (r *rig) waitEngine(i int) engineStatus {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		e := r.status().Engines[i]
		if e.State == "ready" && e.PID != 0 {
			return e
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("engine %d is %s", i, e.State)
		}
		time.Sleep(20 * time.Millisecond) // an engine's restart, seen through the admin API
	}
}

// quiesce waits, up to within, until nothing is left anywhere: no request
// in flight or queued in the router, and on every engine of both routers
// no sequence running or waiting, no reservation, no KV page held (the
// prefix cache aside). It returns how long that took.
func (r *rig) quiesce(within time.Duration) time.Duration {
	r.t.Helper()
	begin := time.Now()
	for {
		what := r.leftovers()
		if what == "" {
			return time.Since(begin)
		}
		if time.Since(begin) > within {
			r.t.Fatalf("not quiet %v after the last request: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // engines free pages on their own schedule
	}
}

// leftovers describes what is still held, or "".
func (r *rig) leftovers() string {
	st := r.status()
	if st.Queued != 0 {
		return fmt.Sprintf("%d requests queued", st.Queued)
	}
	for _, e := range st.Engines {
		if e.InFlight != 0 {
			return fmt.Sprintf("engine %s: %d calls in flight", e.Addr, e.InFlight)
		}
		if e.State != "ready" {
			continue // restarting: its pages went with its process
		}
		m, err := engineMetrics(e.Addr)
		if err != nil {
			return fmt.Sprintf("engine %s: metrics: %v", e.Addr, err)
		}
		for _, k := range []string{"running", "waiting", "prepared", "kv_pages_used"} {
			if m[k] != 0 {
				return fmt.Sprintf("engine %s: %s = %v", e.Addr, k, m[k])
			}
		}
	}
	return ""
}

// engineMetrics asks an engine for its metrics (query_engine_metrics).
func engineMetrics(addr string) (map[string]float64, error) {
	body := `{"prompt":[1],"max_tokens":1,"debug_config":{"special_request":"query_engine_metrics"}}`
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out protocol.CompletionResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Usage == nil {
		return nil, fmt.Errorf("engine metrics: %v", err)
	}
	m := map[string]float64{}
	for k, v := range out.Usage.Extra {
		var f float64
		if json.Unmarshal(v, &f) == nil {
			m[k] = f
		}
	}
	return m, nil
}

// checkGoroutines waits until the goroutines are back to the baseline.
// Pooled keep-alive connections (the router's to its engines) are not
// leaks and are not counted.
func (r *rig) checkGoroutines() {
	r.t.Helper()
	r.client.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := countGoroutines()
		if n <= r.goroutines+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			r.t.Fatalf("%d goroutines, %d before the faults:\n%s", n, r.goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond) // connection goroutines end as their peers close
	}
}

// countGoroutines counts the goroutines that are not pooled keep-alive
// connections.
func countGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "net/http.(*conn).serve") {
			continue
		}
		n++
	}
	return n
}

// freeAddr is a free 127.0.0.1 address.
func freeAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testnet.FreePort(t)))
}
