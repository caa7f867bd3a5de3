package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
)

func oneFleet(t testing.TB) *engine.Fleet {
	t.Helper()
	fs := liveFleets()
	if len(fs) != 1 {
		t.Fatalf("%d live fleets, want 1", len(fs))
	}
	return fs[0]
}

func pids(f *engine.Fleet) []int {
	var out []int
	for i := 0; i < f.Len(); i++ {
		out = append(out, f.PID(i))
	}
	return out
}

// waitState waits (on the fleet's change notifications) until engine i is
// in state want.
func waitState(t *testing.T, f *engine.Fleet, i int, want engine.State) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		ch := f.Changed()
		if f.State(i) == want {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("engine %d is %v, want %v", i, f.State(i), want)
		}
	}
}

func caddyfileFor(httpPort int, enginePorts []int, mode string) []byte {
	var eps strings.Builder
	for _, p := range enginePorts {
		fmt.Fprintf(&eps, "\t\tendpoint 127.0.0.1:%d\n", p)
	}
	cf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:%d {\n\tmlc_router {\n\t\tmodel tiny\n\t\tmode %s\n%s\t}\n}\n", httpPort, mode, eps.String())
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		panic(err)
	}
	return cfg
}

// A reload with the same engines keeps the engine processes; a reload with
// other engines replaces them; stopping Caddy leaves no engine behind.
func TestReloadSharesEngines(t *testing.T) {
	before := enginetest.Children(t)
	ports := freePorts(t, 5)
	loadConfig(t, caddyfileFor(ports[0], ports[1:3], "round_robin"))
	first := pids(oneFleet(t))
	// Same engines, another change (mode): the engines stay.
	loadConfig(t, caddyfileFor(ports[0], ports[1:3], "disagg"))
	if got := pids(oneFleet(t)); fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("reload with the same engines: pids %v, were %v", got, first)
	}
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), client: httpClient()}
	if _, status, raw := s.complete(s.base, greedy("hello there", 4)); status != 200 {
		t.Fatalf("after reload: %d %s", status, raw)
	}
	// Other engines: a new fleet, the old one drained and stopped.
	old := runningFleets()
	loadConfig(t, caddyfileFor(ports[0], ports[3:5], "disagg"))
	waitDrained(t, old)
	second := pids(oneFleet(t))
	for _, p := range first {
		for _, q := range second {
			if p == q {
				t.Fatalf("changed engines kept pid %d", p)
			}
		}
		if enginetest.Children(t)[p] {
			t.Fatalf("old engine %d still running", p)
		}
	}
	if _, status, raw := s.complete(s.base, greedy("hello there", 4)); status != 200 {
		t.Fatalf("after the second reload: %d %s", status, raw)
	}
	stopCaddy(t)
	for pid := range enginetest.Children(t) {
		if !before[pid] {
			t.Fatalf("child %d outlived caddy.Stop", pid)
		}
	}
}

// An engine killed with SIGKILL is restarted; meanwhile the router serves
// every request on the other engine.
func TestKilledEngineIsRoutedAround(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode whole\n")
	f := oneFleet(t)
	pid := f.PID(0)
	ch := f.Changed()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ch // the fleet saw the death
	for i := range 6 {
		st, err := s.stream(context.Background(), s.base, greedy("the river", 8))
		if err != nil || !st.done || st.errBody != nil {
			t.Fatalf("request %d while engine 0 is down: %v %+v", i, err, st)
		}
	}
	waitState(t, f, 0, engine.StateReady)
	if f.Restarts(0) < 1 || f.PID(0) == pid {
		t.Fatalf("engine 0 not restarted: restarts %d pid %d", f.Restarts(0), f.PID(0))
	}
	if _, status, raw := s.complete(s.engines[0], greedy("the river", 8)); status != 200 {
		t.Fatalf("restarted engine: %d %s", status, raw)
	}
}

func TestAdminStatus(t *testing.T) {
	startSite(t, 2, "\t\t\tmode disagg\n")
	st := liveNow().lifecycle.Statuses()
	if len(st) != 1 || len(st[0].Engines) != 2 {
		t.Fatalf("%+v", st)
	}
	e0, e1 := st[0].Engines[0], st[0].Engines[1]
	if e0.Role != "prefill" || e1.Role != "decode" || e0.State != "ready" || e1.PEStart != 1 || e0.PID == 0 {
		t.Fatalf("%+v", st)
	}
}

// streamKilling streams body through the router and, once the first text
// has arrived, kills the engine victim names (SIGKILL).
func streamKilling(t *testing.T, s *site, body map[string]any, victim func() int) (streamed, error) {
	t.Helper()
	body["stream"] = true
	resp, err := s.client.Post(s.base+"/v1/completions", "application/json", strings.NewReader(mustJSON(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	killed := false
	got, err := readStreamHook(resp.Body, time.Now(), func() {
		if killed {
			return
		}
		killed = true
		if err := syscall.Kill(oneFleet(t).PID(victim()), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	})
	if !killed {
		t.Fatal("the stream carried no text; nothing was killed")
	}
	return got, err
}

// An engine killed in the middle of a stream: the router resumes the
// request on another decode engine from the text already sent, and the
// client sees exactly the text of an undisturbed run.
func TestEngineDeathMidStreamIsResumed(t *testing.T) {
	s := startSite(t, 3, "\t\t\tmode disagg\n")
	body := greedy("a tale of two rivers and the mill between them", 1500) // long enough to outlast the kill
	want := reference(s, s.engines[1], body)
	serving := func() int {
		for i, e := range liveNow().lifecycle.Statuses()[0].Engines {
			if e.Role == "decode" && e.InFlight == 1 {
				return i
			}
		}
		t.Fatalf("no decode engine is serving: %+v", liveNow().lifecycle.Statuses())
		return -1
	}
	got, err := streamKilling(t, s, body, serving)
	if err != nil || !got.done || got.errBody != nil {
		t.Fatalf("stream: %v %+v", err, got)
	}
	if got.text != want {
		t.Fatalf("after the kill:\n got  %q\n want %q", got.text, want)
	}
}

// When the attempts run out mid-stream, the stream ends with an OpenAI
// error event (no [DONE]), and what was sent is a prefix of the real text.
func TestAttemptsExhaustedMidStream(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode disagg\n\t\t\tmax_attempts 1\n")
	body := greedy("the last ferry across the bay", 1500) // long enough to outlast the kill
	want := reference(s, s.engines[1], body)
	got, err := streamKilling(t, s, body, func() int { return 1 }) // the only decode engine
	if err != nil || got.done || got.errBody == nil || got.errBody.Code == nil {
		t.Fatalf("stream: %v %+v", err, got)
	}
	if c := *got.errBody.Code; c != "attempts_exhausted" && c != "engine_unavailable" {
		t.Fatalf("error %+v", got.errBody)
	}
	if !strings.HasPrefix(want, got.text) || got.text == "" {
		t.Fatalf("sent %q, not a prefix of %q", got.text, want)
	}
}

// Validating a config (caddy validate, caddy adapt --validate) provisions
// its modules but starts no engine.
func TestValidateStartsNoEngine(t *testing.T) {
	before := enginetest.Children(t)
	ports := freePorts(t, 3)
	var cfg caddy.Config
	if err := json.Unmarshal(caddyfileFor(ports[0], ports[1:], "disagg"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
	for pid := range enginetest.Children(t) {
		if !before[pid] {
			t.Fatalf("validation started process %d", pid)
		}
	}
	if n := len(liveFleets()); n != 0 {
		t.Fatalf("%d fleets running after validation", n)
	}
}
