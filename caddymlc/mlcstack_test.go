package caddymlc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer/tiny"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/mlcstack"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The router in front of MLC-LLM's own serving layer: three `mlc_llm
// serve` servers (MLC's FastAPI entrypoints and AsyncMLCEngine, run from
// the MLC sources over a stand-in for MLC's C++ core that asks a built-in
// engine for the tokens; see internal/testkit/mlcstack), in one NVSHMEM world
// (PE i on server i, as `gpus 1` in order gives the router), driven in
// both modes, each with servers of its own: server 0 prefills and 1 and 2
// decode in disagg; all three serve whole requests in round_robin. The
// servers preempt every fifth remote_send, as KV pressure does (MLC's
// entrypoint answers 200 {} to it), and their KV holds 32 pages: the
// storm preempts generations everywhere.
//
// The oracle: every request the router sends is accepted by MLC's
// entrypoints (no 4xx or 5xx in their exchanges, but the 404 of caddy-mlc's
// release extension, which MLC has not, and answers to clients that had
// gone); every answer's text is the text one MLC server gives for the same
// request, asked directly (greedy), logprobs included; a chat's response
// format reaches MLC's engine as MLC's own entrypoint gives it
// (responseFormats); the backends hold
// no request nor reservation once the clients are done; no remote_send
// wrote KV into pages the decode engine no longer reserved; no server
// died (a failed check of MLC's C++ kills it). MLC's entrypoints set
// request.debug_config.disagg_config on every microserving call, so a
// router that sends no debug_config gets a 500 for each and fails this
// test.
func TestMLCServingLayer(t *testing.T) {
	st := mlcstack.Setup(t)
	for _, mode := range []string{router.ModeDisagg, router.ModeWhole} {
		t.Run(mode, func(t *testing.T) {
			// Servers of their own: what one mode leaves behind is its own.
			servers := st.Start(t, mlcstack.Options{Servers: 3, MaxTotalSeqLength: mlcKV, Disaggregation: true, PreemptRemoteSends: 5})
			m := &mlcRun{servers: servers, client: &http.Client{Timeout: 3 * time.Minute}, mode: mode}
			marks, events := m.marks(t)
			m.startRouter(t, mode)
			t.Run("requests", m.requests)
			t.Run("response_format", m.responseFormats)
			t.Run("structured_preempted", m.structuredPreempted)
			// The storm before the disconnects: a reservation they leave
			// would shrink the KV the storm has.
			t.Run("preemption_storm", m.storm)
			t.Run("disconnects", m.disconnects)
			if mode == router.ModeDisagg {
				t.Run("disconnect_during_prep_recv", m.disconnectDuringPrepRecv)
			}
			m.checkReleased(t)
			m.checkAccepted(t, marks)
			m.checkEvents(t, events)
			m.checkAlive(t)
		})
	}
}

// mlcKV is each MLC server's and backend's KV capacity and context length
// in tokens: 32 pages, which a few dozen concurrent requests overflow.
const mlcKV = 512

// mlcRun is a run of the test: the MLC servers and the router in front.
type mlcRun struct {
	servers []*mlcstack.Server
	client  *http.Client
	router  string // the router's base URL
	mode    string
	// proxied is the base URL of a router over the same servers through
	// proxies that preempt the next generation while preempt is armed.
	proxied string
	preempt *atomic.Bool
}

// startRouter loads a Caddy config whose router drives the MLC servers in
// mode, until t ends; a second site (m.proxied) drives them through
// proxies that preempt a generation when m.preempt is armed
// (structuredPreempted).
func (m *mlcRun) startRouter(t *testing.T, mode string) {
	ports := freePorts(t, 2)
	m.router = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	m.proxied = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	m.preempt = new(atomic.Bool)
	var direct, proxied []string
	for _, s := range m.servers {
		direct = append(direct, s.Addr)
		proxied = append(proxied, startPreemptingProxy(t, s.Addr, m.preempt))
	}
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
	skip_install_trust
}
%s
%s`, mlcSite(ports[0], mode, direct), mlcSite(ports[1], mode, proxied)))
}

// mlcSite is a site on port whose router drives the MLC servers at addrs
// in mode (in disagg, the first prefills).
func mlcSite(port int, mode string, addrs []string) string {
	var eps strings.Builder
	for i, addr := range addrs {
		role := ""
		if mode == router.ModeDisagg {
			role = " role decode"
			if i == 0 {
				role = " role prefill"
			}
		}
		fmt.Fprintf(&eps, "\t\t\tendpoint %s gpus 1%s external\n", addr, role)
	}
	return fmt.Sprintf(`http://127.0.0.1:%d {
	route {
		mlc_router {
			model tiny
			engine mlc
			mode %s
			max_prefill_queue off
			engine_timeout 60s
			queue_timeout 60s
%s		}
	}
}
`, port, mode, eps.String())
}

// mlcAnswer is what a client got: per choice, its text, finish reason and
// (completions) logprobs.
type mlcAnswer struct {
	status   int
	texts    []string
	finishes []string
	logprobs []*protocol.CompletionLogprobs
	raw      string
}

func (a *mlcAnswer) choice(i int) {
	for len(a.texts) <= i {
		a.texts = append(a.texts, "")
		a.finishes = append(a.finishes, "")
		a.logprobs = append(a.logprobs, nil)
	}
}

// mlcChoice is a choice of any answer: completion or chat, whole or a
// chunk.
type mlcChoice struct {
	Index        int                          `json:"index"`
	Text         string                       `json:"text"`
	Message      *struct{ Content string }    `json:"message"`
	Delta        *struct{ Content string }    `json:"delta"`
	FinishReason *string                      `json:"finish_reason"`
	Logprobs     *protocol.CompletionLogprobs `json:"-"`
	RawLogprobs  json.RawMessage              `json:"logprobs"`
}

func (a *mlcAnswer) add(chat bool, data []byte) error {
	var r struct {
		Choices []mlcChoice `json:"choices"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%v: %s", err, data)
	}
	for _, c := range r.Choices {
		a.choice(c.Index)
		switch {
		case c.Message != nil:
			a.texts[c.Index] += c.Message.Content
		case c.Delta != nil:
			a.texts[c.Index] += c.Delta.Content
		default:
			a.texts[c.Index] += c.Text
		}
		if c.FinishReason != nil {
			a.finishes[c.Index] = *c.FinishReason
		}
		if !chat && len(c.RawLogprobs) > 0 && string(c.RawLogprobs) != "null" {
			var lp protocol.CompletionLogprobs
			if err := json.Unmarshal(c.RawLogprobs, &lp); err != nil {
				return fmt.Errorf("logprobs: %v: %s", err, data)
			}
			if a.logprobs[c.Index] == nil {
				a.logprobs[c.Index] = protocol.NewCompletionLogprobs(0)
			}
			a.logprobs[c.Index].Append(&lp)
		}
	}
	return nil
}

// ask sends a request to base and reads the answer to its end; a
// streamed one when body says so. afterText, if set, runs after each
// streamed chunk that carried text (it may cancel ctx).
func (m *mlcRun) ask(ctx context.Context, base string, chat bool, body map[string]any, afterText func()) (*mlcAnswer, error) {
	path := protocol.PathCompletions
	if chat {
		path = "/v1/chat/completions"
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	a := &mlcAnswer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || body["stream"] != true {
		raw, err := io.ReadAll(resp.Body)
		a.raw = string(raw)
		if err != nil || resp.StatusCode != http.StatusOK {
			return a, err
		}
		return a, a.add(chat, raw)
	}
	sse := protocol.NewSSEReader(resp.Body, 0)
	done := false
	for {
		data, err := sse.Next()
		if err == io.EOF {
			if !done {
				return a, errors.New("stream ended without [DONE]")
			}
			return a, nil
		}
		if err != nil {
			return a, err
		}
		a.raw += string(data) + "\n"
		if protocol.IsDone(data) {
			done = true
			continue
		}
		if e := protocol.ParseError(0, data); e != nil {
			return a, fmt.Errorf("error event: %s", data)
		}
		n := len(strings.Join(a.texts, ""))
		if err := a.add(chat, data); err != nil {
			return a, err
		}
		if afterText != nil && len(strings.Join(a.texts, "")) > n {
			afterText()
		}
	}
}

// oracle asks MLC server 0 directly, whole.
func (m *mlcRun) oracle(t *testing.T, chat bool, body map[string]any) *mlcAnswer {
	t.Helper()
	direct := cloneBody(body)
	delete(direct, "stream")
	delete(direct, "stream_options")
	a, err := m.ask(context.Background(), m.servers[0].URL, chat, direct, nil)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("oracle: %v %+v", err, a)
	}
	return a
}

func cloneBody(body map[string]any) map[string]any {
	out := make(map[string]any, len(body))
	for k, v := range body {
		out[k] = v
	}
	return out
}

// same checks that got has want's texts (and, with logprobs, want's
// logprobs, with offsets in the text).
func sameAnswer(got, want *mlcAnswer) error {
	if got.status != http.StatusOK {
		return fmt.Errorf("status %d: %s", got.status, got.raw)
	}
	if !slices.Equal(got.texts, want.texts) {
		return fmt.Errorf("texts %q, one engine gives %q", got.texts, want.texts)
	}
	for i, w := range want.logprobs {
		g := got.logprobs[i]
		if w == nil {
			continue
		}
		if g == nil {
			return fmt.Errorf("choice %d: no logprobs", i)
		}
		if !slices.Equal(g.Tokens, w.Tokens) || !slices.Equal(g.TokenLogprobs, w.TokenLogprobs) {
			return fmt.Errorf("choice %d: logprobs tokens %q %v, one engine gives %q %v", i, g.Tokens, g.TokenLogprobs, w.Tokens, w.TokenLogprobs)
		}
		for k := range w.TopLogprobs {
			if !slices.Equal(g.TopLogprobs[k], w.TopLogprobs[k]) {
				return fmt.Errorf("choice %d token %d: top logprobs %v, one engine gives %v", i, k, g.TopLogprobs[k], w.TopLogprobs[k])
			}
		}
		if len(g.TextOffset) != g.Len() {
			return fmt.Errorf("choice %d: %d text offsets for %d tokens (MLC sends text_offset null; the router fills it)", i, len(g.TextOffset), g.Len())
		}
		for k, off := range g.TextOffset {
			if off < 0 || off > len(got.texts[i]) || (k > 0 && off < g.TextOffset[k-1]) {
				return fmt.Errorf("choice %d: text offsets %v do not fit its text %q", i, g.TextOffset, got.texts[i])
			}
		}
	}
	return nil
}

// mlcCase is a request of the test.
type mlcCase struct {
	name string
	chat bool
	body map[string]any
}

func mlcGreedy(prompt string, maxTokens int, kv ...any) map[string]any {
	body := map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
	for i := 0; i+1 < len(kv); i += 2 {
		body[kv[i].(string)] = kv[i+1]
	}
	return body
}

// stopInside returns a stop string that begins inside a word of text after
// its first few: MLC drops the whole token the stop string begins in.
func stopInside(t *testing.T, text string) string {
	t.Helper()
	words := strings.Fields(text)
	for i, w := range words {
		if i >= 3 && len(w) >= 4 && !strings.Contains(strings.Join(words[:i], " "), w[1:3]) {
			return w[1:3]
		}
	}
	t.Fatalf("no word to stop inside in %q", text)
	return ""
}

// requests sends each case to the router, whole and streamed, one at a
// time, and compares the answers with one MLC server's: greedy, and
// sampled with a seed.
func (m *mlcRun) requests(t *testing.T) {
	stopPrompt := "a little dog ran down the road to find his old friend the"
	plain := m.oracle(t, false, mlcGreedy(stopPrompt, 32))
	cases := []mlcCase{
		{"completion", false, mlcGreedy("the cat sat on the mat and then it went to", 24)},
		{"chat", true, map[string]any{"model": "tiny", "messages": []map[string]string{{"role": "user", "content": "where is the big red house"}}, "max_tokens": 24, "temperature": 0}},
		{"chat_two_turns", true, map[string]any{"model": "tiny", "messages": []map[string]string{
			{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hello, how can I help"}, {"role": "user", "content": "tell me a story"}},
			"max_tokens": 20, "temperature": 0}},
		{"stop", false, mlcGreedy(stopPrompt, 32, "stop", []string{stopInside(t, plain.texts[0])})},
		{"n2", false, mlcGreedy("one day the king came to the small town by the sea", 16, "n", 2)},
		// Sampling with a seed is reproducible: MLC's choice i of n > 1
		// samples with seed+i+1 (its n = 1 with the seed itself).
		{"seeded", false, mlcGreedy("the old man and the sea", 16, "temperature", 0.9, "seed", 7)},
		{"n2_seeded", false, mlcGreedy("the old man and the sea", 16, "temperature", 0.9, "seed", 7, "n", 2)},
		{"logprobs", false, mlcGreedy("my mother has a garden with many", 12, "logprobs", 2)},
		{"echo", false, mlcGreedy("the sun is hot and the", 12, "echo", true)},
		{"suffix", false, mlcGreedy("we went to the river to", 12, "suffix", " the end.")},
	}
	for _, c := range cases {
		want := m.oracle(t, c.chat, c.body)
		if c.name == "stop" && (want.finishes[0] != "stop" || len(want.texts[0]) >= len(plain.texts[0])) {
			t.Fatalf("the stop string %v did not stop MLC: %q, %q", c.body["stop"], want.texts, want.finishes)
		}
		for _, stream := range []bool{false, true} {
			name := c.name
			body := cloneBody(c.body)
			if stream {
				name += "_streamed"
				body["stream"] = true
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			t.Run(name, func(t *testing.T) {
				got, err := m.ask(context.Background(), m.router, c.chat, body, nil)
				if err == nil {
					err = sameAnswer(got, want)
				}
				if err != nil {
					t.Errorf("%s: %v", mustJSON(body), err)
				}
			})
		}
	}
}

// disconnects sends requests whose clients go away, streamed ones after
// their first text, whole ones while an engine works on them; then the
// engines must give back everything those requests held.
func (m *mlcRun) disconnects(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := mlcGreedy(fmt.Sprintf("story %d: the old man and the sea went out to", i), 200, "stream", true)
			_, _ = m.ask(ctx, m.router, false, body, cancel)
		})
	}
	wg.Wait()
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = m.ask(ctx, m.router, false, mlcGreedy(fmt.Sprintf("tale %d: a girl and her dog walked to the farm", i), 300), nil)
		}()
		m.waitBusy(t, done)
		cancel()
		<-done
	}
	m.checkReleased(t)
}

// disconnectDuringPrepRecv has a client leave while its prep_recv waits
// for KV on a decode engine: the decode engines' pages are held by
// reservations made on their backends directly, the request's prep_recv
// waits, its client leaves, and the reservations go. MLC answers that
// prep_recv once served (its client gone, it aborts the request, which
// frees nothing of a prepared one); the router must neither leave the
// reservation behind nor release it in a way that kills the engine.
func (m *mlcRun) disconnectDuringPrepRecv(t *testing.T) {
	tok := tiny.New()
	var block []int
	for len(block) < mlcKV-112 { // all but 7 of the 32 pages
		block = append(block, tok.Encode(" the cat sat on a mat")...)
	}
	block = block[:mlcKV-112]
	decoders := m.servers[1:]
	for i, s := range decoders {
		b, _ := json.Marshal(map[string]any{"prompt": block, "end": -1, "user": fmt.Sprintf("blocker-%d", i)})
		resp, err := http.Post(s.Backend+protocol.PathPrepRecv, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("blocker on backend %s: %d", s.Backend, resp.StatusCode)
		}
	}
	unblock := func() {
		for i, s := range decoders {
			b, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("blocker-%d", i)})
			if resp, err := http.Post(s.Backend+protocol.PathRelease, "application/json", bytes.NewReader(b)); err == nil {
				resp.Body.Close()
			}
		}
	}
	defer unblock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := strings.Repeat(" a big red house near the river", 20) // 140 tokens: 9 pages
		_, _ = m.ask(ctx, m.router, false, mlcGreedy(p, 16), nil)
	}()
	deadline := time.Now().Add(time.Minute)
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		for _, s := range decoders {
			if l, err := s.BackendLoad(); err == nil && l.Waiting > 0 {
				waiting = true
			}
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("no prep_recv waited for KV within a minute")
		}
	}
	cancel()
	<-done
	unblock()
	m.checkReleased(t)
}

// waitBusy waits until a backend works on something, or done closes.
func (m *mlcRun) waitBusy(t *testing.T, done <-chan struct{}) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return
		default:
		}
		for _, s := range m.servers {
			if l, err := s.BackendLoad(); err == nil && !l.Idle() {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no backend got to work within a minute")
}

// storm sends many requests at once, whose KV does not fit the engines:
// they preempt, the router resumes, and every answer must still be the
// text one engine gives, a suffix at its very end.
func (m *mlcRun) storm(t *testing.T) {
	words := strings.Fields("the cat sat on a mat and then it went to see his old friend the dog who lived in a big red house near the river where many people came to fish every day")
	type job struct {
		body map[string]any
		want *mlcAnswer
	}
	var jobs []job
	for i := range 48 {
		var p []string
		for k := range 100 + i%4*30 {
			p = append(p, words[(i*7+k*(i%5+1))%len(words)])
		}
		body := mlcGreedy(strings.Join(p, " "), 40)
		if i%4 == 1 {
			body["suffix"] = " the end."
		}
		jobs = append(jobs, job{body: body, want: m.oracle(t, false, body)})
		if i%2 == 1 {
			jobs[i].body = cloneBody(body)
			jobs[i].body["stream"] = true
		}
	}
	before := m.preemptions(t)
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			got, err := m.ask(context.Background(), m.router, false, j.body, nil)
			if err == nil {
				err = sameAnswer(got, j.want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d %s: %v", i, mustJSON(jobs[i].body), err)
		}
	}
	preempted := m.preemptions(t) - before
	t.Logf("%d requests, %d preemptions on the backends", len(jobs), preempted)
	if preempted == 0 {
		t.Errorf("no backend preempted: the storm did not overflow the KV caches")
	}
}

// preemptions sums the backends' preemption counts.
func (m *mlcRun) preemptions(t *testing.T) int {
	t.Helper()
	n := 0
	for _, s := range m.servers {
		l, err := s.BackendLoad()
		if err != nil {
			t.Fatal(err)
		}
		n += l.Preemptions
	}
	return n
}

// checkReleased waits until no backend holds a request, a reservation or a
// KV page in use: whatever the clients left, the router gave back. MLC
// does not abort a stream whose client left: such a generation runs to its
// max_tokens first.
func (m *mlcRun) checkReleased(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var busy []string
		for i, s := range m.servers {
			l, err := s.BackendLoad()
			if err != nil {
				t.Fatalf("backend %d: %v", i, err)
			}
			if !l.Idle() {
				busy = append(busy, fmt.Sprintf("backend %d: %+v", i, l))
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("30 s after the clients were done, the engines still hold work: %s", strings.Join(busy, "; "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// marks returns how many exchanges and events each MLC server had so far.
func (m *mlcRun) marks(t *testing.T) (exchanges, events []int) {
	t.Helper()
	for _, s := range m.servers {
		ex, err := s.Exchanges()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := s.Events()
		if err != nil {
			t.Fatal(err)
		}
		exchanges, events = append(exchanges, len(ex)), append(events, len(ev))
	}
	return exchanges, events
}

// checkEvents logs what the MLC engines did silently since marks, and
// fails on what harms other requests: a remote_send writing KV into pages
// the decode engine had given back (the router released a reservation
// while a remote_send to it still ran, which MLC's prefill engine
// finishes whether or not its caller left).
func (m *mlcRun) checkEvents(t *testing.T, marks []int) {
	t.Helper()
	counts := map[string]int{}
	for i, s := range m.servers {
		ev, err := s.Events()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ev[marks[i]:] {
			counts[e.Kind]++
			if e.Harmful {
				t.Errorf("MLC server %d: %s: %s", i, e.Kind, e.Message)
			}
		}
	}
	t.Logf("MLC engines' silent events: %v", counts)
}

// checkAccepted checks the MLC servers' exchanges since marks: MLC's
// entrypoints accepted every request, but the release extension it has not
// (404), requests whose client had gone and the test's own probes of what
// MLC refuses (mlcRefusalProbe).
func (m *mlcRun) checkAccepted(t *testing.T, marks []int) {
	t.Helper()
	counts := map[string]int{}
	for i, s := range m.servers {
		ex, err := s.Exchanges()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ex[marks[i]:] {
			counts[fmt.Sprintf("%s %d", e.Path, e.Status)]++
			switch {
			case e.Status < 400:
			case e.Status == http.StatusNotFound && e.Path == protocol.PathRelease:
			case e.Disconnected:
			case e.Status == http.StatusUnprocessableEntity && strings.Contains(e.Request, mlcRefusalProbe):
			default:
				t.Errorf("MLC server %d refused %s %s: %d %s\n  request: %s\n  answer: %s", i, e.Method, e.Path, e.Status, e.Exception, e.Request, e.Response)
			}
		}
	}
	t.Logf("MLC servers' exchanges: %v", counts)
}

// checkAlive checks that no MLC server or backend died.
func (m *mlcRun) checkAlive(t *testing.T) {
	t.Helper()
	for _, s := range m.servers {
		if err := s.Exited(); err != nil {
			t.Error(err)
		}
	}
}
