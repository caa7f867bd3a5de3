package caddymlc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/redistest"
)

// The sessions option as the Caddyfile writes it.
func TestSessionsOptionParses(t *testing.T) {
	for _, tc := range []struct{ opts, want, err string }{
		{"sessions off", `"sessions":{"off":true}`, ""},
		{"sessions header X-Session-Id balance 4 2 ttl 10m", `"sessions":{"header":"X-Session-Id","balance_calls":4,"balance_ratio":2,"ttl":600000000000}`, ""},
		{"sessions balance 4", "", "want 2 value(s)"},
		{"sessions balance 4 0.5", "", "want 1 or more"},
		{"sessions sticky", "", `unknown option "sticky"`},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mlc_router {\nmodel tiny\nmode whole\n" + tc.opts + "\n}"))
		raw, _ := json.Marshal(h)
		cfg := string(raw)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error with %q", tc.opts, err, tc.err)
		case tc.err == "" && (err != nil || !strings.Contains(cfg, tc.want)):
			t.Errorf("%q: %v\n%s\nwant %s", tc.opts, err, cfg, tc.want)
		}
	}
}

// Three replicas in front of three engines, one session's turns
// arriving at each in turn: every turn goes to the engine of the first,
// wherever it arrives, because each replica tells the others where it
// sent the session (through Redis). Alone, each replica would place the
// session's first turn there by its own load and rotation.
func TestSessionsStickAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ports := freePorts(t, 8)
	var engines []string
	for _, p := range ports[:3] {
		e := fmt.Sprintf("127.0.0.1:%d", p)
		startEngineProc(t, e, nil)
		engines = append(engines, e)
	}
	three := func(admin string, port int) string {
		return strings.Replace(replicaConfig(admin, srv.Addr(), port, "", engines...), "replicas 2", "replicas 3", 1)
	}
	admins := []int{0, ports[6], ports[7]}
	startReplica(t, three(fmt.Sprintf("127.0.0.1:%d", admins[1]), ports[4]))
	startReplica(t, three(fmt.Sprintf("127.0.0.1:%d", admins[2]), ports[5]))
	loadCaddyfile(t, three("off", ports[3]))
	waitClusterUp(t, liveCluster(t))
	bases := make([]string, 3)
	for i := range bases {
		bases[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[3+i])
		if i > 0 {
			waitReplicaClusterUp(t, admins[i])
			waitAnswers(t, bases[i])
		}
	}
	applied := func(i int) float64 {
		if i == 0 {
			return metricValue(t, "caddy_mlc_session_events_applied_total")
		}
		return replicaMetric(t, admins[i], "caddy_mlc_session_events_applied_total")
	}
	requests := func(i int) []int64 {
		if i == 0 {
			var out []int64
			for _, e := range liveNow().lifecycle.Statuses()[0].Engines {
				out = append(out, e.Requests)
			}
			return out
		}
		return engineRequestsOf(t, admins[i])
	}
	s := &site{t: t, base: bases[0], client: httpClient()}
	prompt := make([]int, 160)
	for k := range prompt {
		prompt[k] = 3 + (k*37)%1100
	}
	// A replica hears only what is published once its subscription is
	// up, which its being on the cluster does not say: probe sessions
	// through A until both others have heard one.
	deadline := time.Now().Add(time.Minute)
	for probe := 0; applied(1) == 0 || applied(2) == 0; probe++ {
		if time.Now().After(deadline) {
			t.Fatal("the other replicas never heard of a session A routed")
		}
		body := greedy([]int{5, 6, 7}, 1)
		body["prompt_cache_key"] = fmt.Sprintf("probe-%d", probe)
		if _, code, raw := s.complete(bases[0], body); code != http.StatusOK {
			t.Fatalf("probe: %d %s", code, raw)
		}
		time.Sleep(100 * time.Millisecond) // the event crosses Redis to other processes: polled
	}
	heard := []float64{applied(0), applied(1), applied(2)}
	home := -1
	for turn := range 6 {
		at := turn % 3
		if turn > 0 {
			waitFor(t, fmt.Sprintf("replica %d to hear of turn %d", at, turn), func() bool { return applied(at) >= heard[at] })
		}
		before := requests(at)
		body := greedy(append([]int(nil), prompt...), 2)
		body["prompt_cache_key"] = "codex-thread-1"
		out, code, raw := s.complete(bases[at], body)
		if code != http.StatusOK {
			t.Fatalf("turn %d through replica %d: %d %s", turn, at, code, raw)
		}
		after := requests(at)
		served := -1
		for i := range after {
			if after[i] > before[i] {
				served = i
			}
		}
		if home < 0 {
			home = served
		}
		if served != home {
			t.Fatalf("turn %d through replica %d went to engine %d, the session's is %d", turn, at, served, home)
		}
		if last := (len(prompt) - 40) / 16 * 16; turn > 0 && out.Usage.Cached() < last {
			t.Errorf("turn %d: %d of %d prompt tokens cached, want the last turn's %d", turn, out.Usage.Cached(), len(prompt), last)
		}
		for i := range heard {
			if i != at {
				heard[i]++
			}
		}
		prompt = append(prompt, prompt[:40]...)
	}
}

// replicaMetric is the value of an unlabelled metric on the Caddy behind
// an admin endpoint; 0 when it is not there yet.
func replicaMetric(t *testing.T, adminPort int, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(adminPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
