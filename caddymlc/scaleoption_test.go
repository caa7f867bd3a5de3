package caddymlc

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// modelStatus is the model's router in GET /mlc/engines.
func modelStatus(t *testing.T, model string) fleet.ModelStatus {
	t.Helper()
	for _, rs := range liveNow().lifecycle.Statuses() {
		if rs.Model == model {
			return rs
		}
	}
	t.Fatalf("no router for %s", model)
	return fleet.ModelStatus{}
}

// scaleStatus is the autoscaling of the model tiny in /mlc/engines.
func scaleStatus(t testing.TB) fleet.ScaleStatus {
	t.Helper()
	for _, rs := range liveNow().lifecycle.Statuses() {
		if rs.Model == "tiny" && rs.Scale != nil {
			return *rs.Scale
		}
	}
	t.Fatal("no autoscaled router for tiny")
	return fleet.ScaleStatus{}
}

// engineStates are the state and scale state of each listed engine.
func engineStates(rs fleet.ModelStatus) []string {
	var out []string
	for _, e := range rs.Engines {
		out = append(out, e.State+"/"+e.Scale)
	}
	return out
}

// A burst of streams on `scale 1 3` over three endpoints waits at the
// gate; within up_after a second engine starts, the streams all finish
// exact, and once the burst is over the engines go back to one, each by
// a drain, with no request failing.
func TestScaleUpUnderBurstAndDown(t *testing.T) {
	// Each decode step takes 3 ms at least, so that the burst outlasts
	// up_after on a fast machine too.
	s := startSite(t, 3, "\t\t\tmode whole\n\t\t\tmax_inflight 2\n\t\t\tengine_args --decode-delay 3ms\n\t\t\tscale 1 3 {\n\t\t\t\tup_after 300ms\n\t\t\t\tdown_after 1s\n\t\t\t\tcooldown 300ms\n\t\t\t}\n")
	if st := engineStates(modelStatus(t, "tiny")); !slices.Equal(st, []string{"ready/", "stopped/scaled down", "stopped/scaled down"}) {
		t.Fatalf("at the start: %v", st)
	}
	decisions := func(dir, reason string) float64 {
		return metricValue(t, "caddy_mlc_scale_decisions_total", "model", "tiny", "direction", dir, "reason", reason)
	}
	upsBefore, downsBefore := decisions("up", "queue"), decisions("down", "idle")
	const streams, maxTokens = 12, 160
	prompt := func(i int) string { return fmt.Sprintf("the %d bells of the drowned town ring at low tide", i) }
	want := make([]string, streams)
	for i := range want {
		want[i] = reference(s, s.engines[0], greedy(prompt(i), maxTokens))
	}
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			if err := s.streamExact(s.base, greedy(prompt(i), maxTokens), want[i], func() {}); err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}
	var reacted time.Duration
	waitFor(t, "a second engine", func() bool {
		st := modelStatus(t, "tiny").Scale
		if st != nil && st.Target >= 2 && reacted == 0 {
			reacted = time.Since(begin)
		}
		return st != nil && st.Ready >= 2
	})
	up := modelStatus(t, "tiny").Scale
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("scale-up decided %v after the burst began, second engine ready at %v; last event %+v",
		reacted.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), up.Last)
	if reacted > 300*time.Millisecond+5*time.Second {
		t.Errorf("the scale-up came %v after the burst, up_after is 300ms", reacted)
	}
	if up.Last == nil || up.Last.Direction != "up" || up.Last.Reason != "queue" {
		t.Errorf("the scale-up: %+v", up.Last)
	}

	waitFor(t, "the engines to scale back to one", func() bool {
		st := modelStatus(t, "tiny")
		return st.Scale.Target == 1 && st.Scale.Ready == 1 &&
			slices.Equal(engineStates(st), []string{"ready/", "stopped/scaled down", "stopped/scaled down"})
	})
	down := modelStatus(t, "tiny").Scale.Last
	if down == nil || down.Direction != "down" || down.Reason != "idle" || down.Error != "" {
		t.Errorf("the scale-down: %+v", down)
	}
	if ups, downs := decisions("up", "queue")-upsBefore, decisions("down", "idle")-downsBefore; ups < 1 || downs != ups {
		t.Errorf("caddy_mlc_scale_decisions_total: %v up (queue), %v down (idle)", ups, downs)
	}
	for i := range 3 {
		if got := s.streamExact(s.base, greedy(prompt(i), maxTokens), want[i], func() {}); got != nil {
			t.Errorf("after the scale-down, stream %d: %v", i, got)
		}
	}
}

// readyz is the readiness answer at base+/healthz.
func readyz(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return resp.StatusCode, body
}

// `scale 0 1`: the model starts asleep, is listed and ready (cold); its
// first request waits while the engine starts and is answered exactly;
// the next is served by the same, warm, engine; idle, it sleeps again,
// and the request after that wakes it again.
func TestScaleFromZero(t *testing.T) {
	s := startSite(t, 1, "\t\t\tmode whole\n\t\t\tqueue_timeout 60s\n\t\t\thealth_uri /healthz\n\t\t\tscale 0 1 {\n\t\t\t\tdown_after 1500ms\n\t\t\t\tcooldown 200ms\n\t\t\t}\n")
	asleep := func() bool {
		st := modelStatus(t, "tiny")
		return slices.Equal(engineStates(st), []string{"stopped/scaled down"}) && st.Scale.Target == 0
	}
	if !asleep() {
		t.Fatalf("at the start: %v", engineStates(modelStatus(t, "tiny")))
	}
	if status, body := readyz(t, s.base); status != http.StatusOK || fmt.Sprint(body["cold"]) != "[tiny]" {
		t.Errorf("readiness asleep: %d %v", status, body)
	}
	resp, err := http.Get(s.base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"tiny"`) {
		t.Errorf("/v1/models asleep: %s", raw)
	}

	body := func(i int) map[string]any {
		return greedy(fmt.Sprintf("a lighthouse %d wakes when the fog comes in", i), 48)
	}
	for round := range 2 {
		begin := time.Now()
		first, status, raw := s.complete(s.base, body(round))
		if status != http.StatusOK {
			t.Fatalf("round %d, cold request: %d %s", round, status, raw)
		}
		cold := time.Since(begin)
		pid := modelStatus(t, "tiny").Engines[0].PID
		if want := reference(s, s.engines[0], body(round)); first.Choices[0].Text != want {
			t.Errorf("round %d, cold answer %q, want %q", round, first.Choices[0].Text, want)
		}
		begin = time.Now()
		if second, status, raw := s.complete(s.base, body(round)); status != http.StatusOK || second.Choices[0].Text != first.Choices[0].Text {
			t.Errorf("round %d, warm request: %d %s", round, status, raw)
		}
		warm := time.Since(begin)
		if p := modelStatus(t, "tiny").Engines[0].PID; p != pid || pid == 0 {
			t.Errorf("round %d: the warm request's engine %d, the cold one's %d", round, p, pid)
		}
		if status, body := readyz(t, s.base); status != http.StatusOK || body["cold"] != nil {
			t.Errorf("readiness warm: %d %v", status, body)
		}
		t.Logf("round %d: cold request %v, warm %v", round, cold.Round(time.Millisecond), warm.Round(time.Millisecond))
		waitFor(t, "the model to sleep again", asleep)
		if last := modelStatus(t, "tiny").Scale.Last; last == nil || last.Reason != "idle" {
			t.Errorf("the scale to zero: %+v", last)
		}
	}
}

// scale parses with its block, takes its defaults (max: every spawned
// endpoint), and bad forms are errors naming the line; in disagg, engines
// with a real NVSHMEM world are refused.
func TestCaddyfileScale(t *testing.T) {
	parse := func(lines string) (*Handler, error) {
		var r Handler
		err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\n" + lines + "\n}"))
		return &r, err
	}
	eps := "endpoint 127.0.0.1:9001\nendpoint 127.0.0.1:9002\nendpoint 127.0.0.1:9003\nendpoint 127.0.0.1:9004 external\n"
	r, err := parse("mode whole\n" + eps + "scale 1 {\nup_after 1s\nkv_high 0.8\n}")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.EffectiveModels()
	if err != nil {
		t.Fatal(err)
	}
	want := Scale{Min: 1, Max: 3, UpAfter: caddy.Duration(time.Second), DownAfter: caddy.Duration(fleet.DefaultScaleDownAfter),
		Cooldown: caddy.Duration(fleet.DefaultScaleCooldown), KVHigh: 0.8}
	if got := ms[0].Scale; got == nil || *got != want {
		t.Errorf("scale %+v, want %+v", got, want)
	}
	for _, tc := range []struct{ lines, want string }{
		{"mode whole\n" + eps + "scale 3 1", "min is more than max"},
		{"mode whole\n" + eps + "scale many", "want an engine count"},
		{"mode whole\n" + eps + "scale", "want <min> [<max>]"},
		{"mode whole\n" + eps + "scale 1 4", "more than the 3 spawned endpoints"},
		{"mode whole\n" + eps + "scale 1 {\nsoon 1s\n}", "unknown option"},
		{"mode whole\n" + eps + "scale 1 {\nup_after -1s\n}", "positive duration"},
		{"mode whole\n" + eps + "scale 1 {\nkv_high 2\n}", "kv_high"},
		{"mode whole\nendpoint 127.0.0.1:9004 external\nscale 0 1", "no spawned endpoint"},
		{"mode disagg\nengine mlc\n" + eps + "scale 1", "NVSHMEM world"},
	} {
		_, err := parse(tc.lines)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: %v, want %q at a line", tc.lines, err, tc.want)
		}
	}
	if _, err := parse("mode disagg\n" + eps + "scale 1 2"); err != nil {
		t.Errorf("the built-in engine in disagg: %v", err)
	}
}

// In disagg, `scale 1` starts the first decode engine, which serves
// alone (it prefills itself while no prefill engine runs), exactly.
func TestScaleDisaggStartsADecodeEngine(t *testing.T) {
	s := startSite(t, 3, "\t\t\tmode disagg\n\t\t\tscale 1 3\n")
	if st := engineStates(modelStatus(t, "tiny")); !slices.Equal(st, []string{"stopped/scaled down", "ready/", "stopped/scaled down"}) {
		t.Fatalf("at the start: %v", st)
	}
	body := greedy("the decode engine keeps the night watch alone", 64)
	want := reference(s, s.engines[1], body)
	if err := s.streamExact(s.base, body, want, func() {}); err != nil {
		t.Error(err)
	}
}

// An engine that cannot start (its port taken) is not started again in
// a loop: the failure shows in /mlc/engines and the next try waits the
// cool-down; once the port is free, the waiting request is served.
func TestScaleFailedStartCoolsDown(t *testing.T) {
	const cooldown = 3 * time.Second
	s := startSite(t, 1, "\t\t\tmode whole\n\t\t\tqueue_timeout 60s\n\t\t\tscale 0 1 {\n\t\t\t\tcooldown 3s\n\t\t\t}\n")
	coldStarts := func() float64 {
		return metricValue(t, "caddy_mlc_scale_decisions_total", "model", "tiny", "direction", "up", "reason", "cold_start")
	}
	before := coldStarts()
	taken, err := net.Listen("tcp", strings.TrimPrefix(s.engines[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := greedy("the keeper waits for the lamp to be lit", 16)
	type answer struct {
		text   string
		status int
		took   time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		begin := time.Now()
		resp, status, _ := s.complete(s.base, body)
		a := answer{status: status, took: time.Since(begin)}
		if resp != nil {
			a.text = resp.Choices[0].Text
		}
		done <- a
	}()
	var failed time.Time
	waitFor(t, "the start to fail", func() bool {
		last := modelStatus(t, "tiny").Scale.Last
		if last != nil && last.Error != "" {
			failed = time.Now()
			return true
		}
		return false
	})
	taken.Close()
	a := <-done
	if a.status != http.StatusOK {
		t.Fatalf("the waiting request: %d", a.status)
	}
	if want := reference(s, s.engines[0], body); a.text != want {
		t.Errorf("answer %q, want %q", a.text, want)
	}
	if since := time.Since(failed); since < cooldown-500*time.Millisecond {
		t.Errorf("served %v after the failed start, within the %v cool-down", since, cooldown)
	}
	if n := coldStarts() - before; n != 2 {
		t.Errorf("%v cold starts, want 2: the failed one and the one after the cool-down", n)
	}
	t.Logf("served after %v", a.took.Round(time.Millisecond))
}

// A reload that keeps the engines applies new bounds to the running
// pool: a higher min starts engines (below_min), no scale starts them all
// (scale_off), and a scale again lets the idle ones go.
func TestScaleAcrossReloads(t *testing.T) {
	ports := freePorts(t, 4)
	eps := "\t\tmode whole\n" + endpointLines(ports[1:]...)
	reloadSite(t, ports[0], eps+"\t\tscale 1 3\n")
	t.Cleanup(func() { stopCaddy(t) })
	ready := func(n int) func() bool {
		return func() bool {
			count := 0
			for _, st := range engineStates(modelStatus(t, "tiny")) {
				if st == "ready/" {
					count++
				}
			}
			return count == n
		}
	}
	waitFor(t, "one engine", ready(1))
	steps := []struct {
		scale  string
		ready  int
		reason string
	}{
		{"\t\tscale 2 3\n", 2, "below_min"},
		{"", 3, ""},
		{"\t\tscale 1 {\n\t\t\tdown_after 300ms\n\t\t\tcooldown 200ms\n\t\t}\n", 1, "idle"},
	}
	for _, st := range steps {
		reloadSite(t, ports[0], eps+st.scale)
		waitFor(t, fmt.Sprintf("%d engines after a reload with %q", st.ready, st.scale), ready(st.ready))
		scale := modelStatus(t, "tiny").Scale
		switch {
		case st.reason == "" && scale != nil:
			t.Errorf("no scale option, status %+v", scale)
		case st.reason != "" && (scale == nil || scale.Last == nil || scale.Last.Reason != st.reason):
			t.Errorf("after %q: %+v", st.scale, scale)
		}
		base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		s := &site{t: t, base: base, client: httpClient()}
		body := greedy("the mill turns while the river runs", 12)
		if got, status, _ := s.complete(base, body); status != http.StatusOK || got.Choices[0].Text != reference(s, fmt.Sprintf("http://127.0.0.1:%d", ports[1]), body) {
			t.Errorf("after %q: %d", st.scale, status)
		}
	}
}
