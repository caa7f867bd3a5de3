package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// loadGen keeps n clients streaming greedy completions through a router
// and checks every answer against the text of an undisturbed run.
type loadGen struct {
	t    *testing.T
	s    *site
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	ok      int
	retried int
	failed  []string
}

// startLoad computes the reference text of n prompts through the router,
// then keeps n clients sending them until stop.
func startLoad(t *testing.T, s *site, n int) *loadGen {
	t.Helper()
	g := &loadGen{t: t, s: s, stop: make(chan struct{})}
	for i := range n {
		body := func() map[string]any { return greedy(fmt.Sprintf("reload load %d: the mill by the river", i), 24) }
		st, err := s.stream(context.Background(), s.base, body())
		if err != nil || !st.done || st.errBody != nil {
			t.Fatalf("reference %d: %v %+v", i, err, st.errBody)
		}
		want := st.text
		g.wg.Go(func() {
			for {
				select {
				case <-g.stop:
					return
				default:
				}
				got, err := s.stream(context.Background(), s.base, body())
				// Two races of any Caddy reload, below the router, fail
				// a request before it is read: the old server closes
				// its idle keep-alive connections as it shuts down, and
				// Linux resets the connections still in the accept
				// queue of its SO_REUSEPORT listener. Clients retry
				// such connection errors (the OpenAI SDKs do, with a
				// backoff); the router's answers are what is judged.
				for try := 1; try <= 5 && err != nil && !strings.HasPrefix(err.Error(), "status "); try++ {
					g.mu.Lock()
					g.retried++
					g.mu.Unlock()
					time.Sleep(time.Duration(try) * 20 * time.Millisecond) // client backoff, not synchronisation
					got, err = s.stream(context.Background(), s.base, body())
				}
				g.mu.Lock()
				switch {
				case err != nil:
					g.failed = append(g.failed, err.Error())
				case !got.done || got.errBody != nil:
					g.failed = append(g.failed, fmt.Sprintf("stream ended with %+v (done %v)", got.errBody, got.done))
				case got.text != want:
					g.failed = append(g.failed, fmt.Sprintf("text %q, want %q", got.text, want))
				default:
					g.ok++
				}
				g.mu.Unlock()
			}
		})
	}
	return g
}

// waitMore waits until n more requests have completed.
func (g *loadGen) waitMore(n int) {
	g.t.Helper()
	g.mu.Lock()
	target := g.ok + n
	g.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		g.mu.Lock()
		ok, failed := g.ok, len(g.failed)
		g.mu.Unlock()
		if ok >= target || failed > 0 {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%d requests completed, waiting for %d", ok, target)
		}
		time.Sleep(10 * time.Millisecond) // the clients' progress
	}
}

// finish stops the clients and fails the test on any failed request.
func (g *loadGen) finish() int {
	g.t.Helper()
	close(g.stop)
	g.wg.Wait()
	if len(g.failed) > 0 {
		g.t.Fatalf("%d of %d requests failed; first: %s", len(g.failed), len(g.failed)+g.ok, g.failed[0])
	}
	if g.ok == 0 {
		g.t.Fatal("no request completed")
	}
	g.t.Logf("%d requests completed exactly; %d connection-level retries by the clients", g.ok, g.retried)
	return g.ok
}

// reloadSite loads a Caddyfile with one mlc_router on httpPort.
func reloadSite(t *testing.T, httpPort int, routerBody string) {
	t.Helper()
	reloadCaddyfile(t, fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n%s\t}\n}\n", httpPort, routerBody))
}

func endpointLines(ports ...int) string {
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintf(&b, "\t\tendpoint 127.0.0.1:%d\n", p)
	}
	return b.String()
}

// Ten reloads that move the engines to new ports, under 8 streaming
// clients: no request fails, every text is exact, and the old engines
// stop once their streams are done.
func TestReloadNewPortsDropsNothing(t *testing.T) {
	httpPort := freePorts(t, 1)[0]
	reloadSite(t, httpPort, endpointLines(freePorts(t, 2)...))
	t.Cleanup(func() { stopCaddy(t) })
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), client: httpClient()}
	load := startLoad(t, s, 8)
	for range 10 {
		old := runningFleets()
		reloadSite(t, httpPort, endpointLines(freePorts(t, 2)...))
		waitDrained(t, old)
	}
	n := load.finish()
	t.Logf("%d requests across 10 reloads that changed ports", n)
}

// Ten reloads that change the engines' arguments on the same ports, under
// load: the old engines drain and stop, then the new ones start on the
// same ports while requests wait in the queue; none fails.
func TestReloadSamePortsNewArgs(t *testing.T) {
	ports := freePorts(t, 3)
	eps := endpointLines(ports[1:]...)
	reloadSite(t, ports[0], eps)
	t.Cleanup(func() { stopCaddy(t) })
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	load := startLoad(t, s, 8)
	prev := pids(oneFleet(t))
	for i := range 10 {
		reloadSite(t, ports[0], eps+fmt.Sprintf("\t\tengine_args --overrides max_num_sequence=%d\n", 32+i))
		f := waitReadyFleet(t)
		now := pids(f)
		for _, p := range now {
			if slices.Contains(prev, p) {
				t.Fatalf("reload %d: engine pid %d kept although its arguments changed", i, p)
			}
		}
		prev = now
	}
	n := load.finish()
	t.Logf("%d requests across 10 reloads that changed the engines on the same ports", n)
}

// Ten reloads that change only router settings keep the engine processes.
func TestReloadRouterSettingsKeepsEngines(t *testing.T) {
	ports := freePorts(t, 3)
	eps := endpointLines(ports[1:]...)
	reloadSite(t, ports[0], eps)
	t.Cleanup(func() { stopCaddy(t) })
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	first := pids(oneFleet(t))
	load := startLoad(t, s, 8)
	settings := []string{
		"\t\tmode whole\n",
		"\t\tmode disagg\n\t\tpd_balance_factor 0.3\n",
		"\t\tmax_attempts 9\n",
		"\t\tengine_timeout 20s\n\t\tqueue_timeout 10s\n",
		"\t\tstartup_timeout 1m\n",
	}
	for i := range 10 {
		reloadSite(t, ports[0], eps+settings[i%len(settings)])
		if got := pids(oneFleet(t)); !slices.Equal(got, first) {
			t.Fatalf("reload %d (%q): engine pids %v, were %v", i, settings[i%len(settings)], got, first)
		}
	}
	n := load.finish()
	t.Logf("%d requests across 10 router-only reloads", n)
}

// waitReadyFleet waits until the live config's engines (which may start
// only once the old engines on their ports have stopped) are ready.
func waitReadyFleet(t *testing.T) *engine.Fleet {
	t.Helper()
	fs := poolFleets()
	if len(fs) != 1 {
		t.Fatalf("%d fleets in the pool, want 1", len(fs))
	}
	lf := fs[0]
	deadline := time.After(time.Minute)
	for {
		changed := lf.Changed()
		if err := lf.LaunchErr(); err != nil {
			t.Fatalf("engines failed to start: %v", err)
		}
		ready := 0
		for i := range lf.Len() {
			if lf.Ready(i) {
				ready++
			}
		}
		if ready == lf.Len() {
			return lf.Fleet
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the new engines did not start")
		}
	}
}

// After two reloads that keep the engines, the engines' output still
// reaches Caddy's log: the fleet logs through the newest config's logger,
// not through the first config's (whose log file is another here).
func TestReloadKeepsEngineLogs(t *testing.T) {
	ports := freePorts(t, 3)
	dir := t.TempDir()
	load := func(n int, opts string) string {
		file := fmt.Sprintf("%s/caddy-%d.log", dir, n)
		cf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tlog {\n\t\toutput file %s\n\t\tlevel DEBUG\n\t}\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n%s%s\t}\n}\n",
			file, ports[0], endpointLines(ports[1:]...), opts)
		cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
		if err != nil {
			t.Fatal(err)
		}
		loadConfig(t, cfg)
		return file
	}
	load(1, "")
	t.Cleanup(func() { stopCaddy(t) })
	first := pids(oneFleet(t))
	load(2, "\t\tmax_attempts 3\n")
	last := load(3, "\t\tmax_attempts 4\n")
	if got := pids(oneFleet(t)); !slices.Equal(got, first) {
		t.Fatalf("engines replaced: %v, were %v", got, first)
	}
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	st, err := s.stream(context.Background(), s.base, greedy("where do the logs go", 4))
	if err != nil || !st.done || len(st.raw) == 0 {
		t.Fatalf("request: %v", err)
	}
	var chunk struct{ ID string }
	if err := json.Unmarshal([]byte(st.raw[0]), &chunk); err != nil || chunk.ID == "" {
		t.Fatalf("no id in %s", st.raw[0])
	}
	// The engine logs the request under the router's per-attempt user,
	// which starts with the response id. The line travels through the
	// engine's stderr pipe, so it may land after the stream ended: the
	// file is read until it shows up.
	deadline := time.Now().Add(30 * time.Second)
	for !engineLogged(t, last, chunk.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("no engine line about %s in the newest config's log %s", chunk.ID, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// engineLogged reports whether the log file has an engine output line
// that mentions id.
func engineLogged(t *testing.T, file, id string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, `"logger":"mlc.engine"`) && strings.Contains(line, id) {
			return true
		}
	}
	return false
}

// A reload onto a port that something else still holds is accepted: the
// new engines wait for the port (as for old engines that drain), the
// requests meanwhile wait in the queue, and are served once it is free.
func TestReloadWaitsForATakenPort(t *testing.T) {
	ports := freePorts(t, 5)
	reloadSite(t, ports[0], endpointLines(ports[1], ports[4]))
	t.Cleanup(func() { stopCaddy(t) })
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	want := reference(s, s.base, greedy("the taken port", 8))
	holder, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[2]))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	reloadSite(t, ports[0], endpointLines(ports[2], ports[3])) // fails the test if refused
	// A new connection: the old server closed the kept-alive ones.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	done := make(chan string, 1)
	go func() {
		post := func() (*http.Response, error) {
			return client.Post(s.base+"/v1/completions", "application/json", strings.NewReader(mustJSON(greedy("the taken port", 8))))
		}
		resp, err := post()
		if err != nil {
			// A connection made as Caddy stopped the old server was closed
			// unanswered once in CI under load (EOF, nothing logged, the
			// listener passing between the servers). What this test checks
			// is the queued request's answer once the port is free, so a
			// failure to connect is tried once more.
			resp, err = post()
		}
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		var out protocol.CompletionResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) == 0 {
			done <- fmt.Sprintf("status %d: %v", resp.StatusCode, err)
			return
		}
		done <- out.Choices[0].Text
	}()
	holder.Close()
	select {
	case got := <-done:
		if got != want {
			t.Fatalf("after the port was freed: %q, want %q", got, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("the request did not complete after the port was freed")
	}
}

// A reload that moves the engines, with a grace period shorter than the
// streams: when it ends, the streams still on the old engines move to the
// new ones (cause migrate), exactly, and none is retried as a failure of
// an engine.
func TestReloadGraceEndMovesStreams(t *testing.T) {
	ports := freePorts(t, 5)
	caddyfile := func(engines ...int) string {
		return fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tgrace_period 200ms\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode whole\n%s\t}\n}\n",
			ports[0], endpointLines(engines...))
	}
	loadCaddyfile(t, caddyfile(ports[1], ports[2]))
	t.Cleanup(func() { stopCaddy(t) })
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	const streams, maxTokens = 8, 600
	prompt := func(i int) string { return fmt.Sprintf("the %d lanterns of the harbour", i) }
	want := make([]string, streams)
	for i := range want {
		want[i] = reference(s, fmt.Sprintf("http://127.0.0.1:%d", ports[1+i%2]), greedy(prompt(i), maxTokens))
	}
	migrated := metricValue(t, "caddy_mlc_retries_total", "cause", "migrate")
	failed := metricValue(t, "caddy_mlc_retries_total", "cause", "failure")
	bodies := make([]map[string]any, streams)
	for i := range bodies {
		bodies[i] = greedy(prompt(i), maxTokens)
	}
	finish := s.exactStreams(s.base, bodies, want)
	old := runningFleets()
	loadCaddyfile(t, caddyfile(ports[3], ports[4]))
	finish()
	waitDrained(t, old)
	if n := metricValue(t, "caddy_mlc_retries_total", "cause", "migrate") - migrated; n < 1 {
		t.Errorf("no stream moved at the grace's end (retries{cause=migrate} +%v)", n)
	}
	if n := metricValue(t, "caddy_mlc_retries_total", "cause", "failure") - failed; n != 0 {
		t.Errorf("%v attempts retried as failures: the old engines were cut under their streams", n)
	}
}
