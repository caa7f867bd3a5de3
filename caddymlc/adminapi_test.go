package caddymlc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// adminServer serves the module's admin routes as Caddy's admin endpoint
// does: its mux, with an AdminHandler's error as the status.
func adminServer(t *testing.T) string {
	mux := http.NewServeMux()
	for _, rt := range (adminAPI{}).Routes() {
		mux.Handle(rt.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := rt.Handler.ServeHTTP(w, r); err != nil {
				status := http.StatusInternalServerError
				var ae caddy.APIError
				if errors.As(err, &ae) {
					status = ae.HTTPStatus
				}
				http.Error(w, err.Error(), status)
			}
		}))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// adminPost posts to the admin API and returns the status and body.
func adminPost(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// engineDrain is the drain state of the engine at addr in GET
// /mlc/engines.
func engineDrain(t *testing.T, admin, addr string) string {
	t.Helper()
	resp, err := http.Get(admin + "/mlc/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st []fleet.ModelStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st {
		for _, e := range r.Engines {
			if e.Addr == addr {
				return e.Drain
			}
		}
	}
	t.Fatalf("no engine %s in /mlc/engines", addr)
	return ""
}

// POST /mlc/engines/{addr}/drain?grace=0 moves the streams of a decode
// engine to the other one, exactly; /mlc/engines shows it drained, and
// undrain puts it back. Unknown engines and bad graces are refused.
func TestAdminDrainEngine(t *testing.T) {
	s := startSite(t, 3, "\t\t\tmode disagg\n")
	admin := adminServer(t)
	addr := strings.TrimPrefix(s.engines[2], "http://")
	const streams, maxTokens = 8, 400
	prompt := func(i int) string { return fmt.Sprintf("the %d lanterns of the old lighthouse keeper", i) }
	want := make([]string, streams)
	for i := range want {
		want[i] = reference(s, s.engines[2], greedy(prompt(i), maxTokens))
	}

	bodies := make([]map[string]any, streams)
	for i := range bodies {
		bodies[i] = greedy(prompt(i), maxTokens)
	}
	finish := s.exactStreams(s.base, bodies, want)
	if status, body := adminPost(t, admin+"/mlc/engines/"+addr+"/drain?grace=0"); status != http.StatusOK ||
		!strings.Contains(body, `"drain"`) {
		t.Fatalf("drain: %d %s", status, body)
	}
	finish()
	waitFor(t, "the engine to be drained", func() bool { return engineDrain(t, admin, addr) == fleet.DrainDrained })
	waitFor(t, "its KV pages to return", func() bool {
		m := engineMetrics(t, s.engines[2])
		return m["kv_pages_used"] == 0 && m["running"] == 0 && m["prepared"] == 0
	})

	if status, body := adminPost(t, admin+"/mlc/engines/"+addr+"/undrain"); status != http.StatusOK || !strings.Contains(body, `"drain":""`) {
		t.Fatalf("undrain: %d %s", status, body)
	}
	if st := engineDrain(t, admin, addr); st != "" {
		t.Errorf("undrained engine shows %q", st)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/mlc/engines/127.0.0.1:1/drain", http.StatusNotFound},
		{"/mlc/engines/" + addr + "/drain?grace=soon", http.StatusBadRequest},
		{"/mlc/engines/" + addr + "/drain?grace=-1s", http.StatusBadRequest},
	} {
		if status, body := adminPost(t, admin+tc.path); status != tc.status {
			t.Errorf("POST %s: %d %s, want %d", tc.path, status, body, tc.status)
		}
	}
	resp, err := http.Get(admin + "/mlc/engines/" + addr + "/drain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of a drain: %d", resp.StatusCode)
	}
}

// POST /mlc/models/{model}/restart restarts the model's engines one at a
// time under streaming clients: none fails, every text is exact, every
// engine runs a new process; GET follows the roll; a second restart while
// one runs, and an unknown model, are refused.
func TestAdminRollingRestart(t *testing.T) {
	s := startSite(t, 2, "\t\t\tmode whole\n")
	admin := adminServer(t)
	const clients, maxTokens = 8, 32
	prompt := func(i int) string { return fmt.Sprintf("the %d bells of the drowned town", i%4) }
	want := make([]string, 4)
	for i := range want {
		want[i] = reference(s, s.engines[0], greedy(prompt(i), maxTokens))
	}
	pids := enginePIDs(t, admin)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served atomic.Int64
	errs := make(chan error, clients)
	for k := range clients {
		wg.Go(func() {
			for n := k; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				st, err := s.stream(t.Context(), s.base, greedy(prompt(n), maxTokens))
				if err != nil || st.text != want[n%4] || !st.done || st.errBody != nil {
					errs <- fmt.Errorf("client %d: err %v done %v error %v\n got  %q\n want %q", k, err, st.done, st.errBody, st.text, want[n%4])
					return
				}
				served.Add(1)
			}
		})
	}
	status, body := adminPost(t, admin+"/mlc/models/tiny/restart?grace=100ms")
	if status != http.StatusAccepted || !strings.Contains(body, `"state":"running"`) {
		t.Fatalf("restart: %d %s", status, body)
	}
	if status, body := adminPost(t, admin+"/mlc/models/tiny/restart"); status != http.StatusConflict {
		t.Errorf("a second restart while one runs: %d %s", status, body)
	}
	var roll fleet.RollStatus
	waitFor(t, "the rolling restart to end", func() bool {
		resp, err := http.Get(admin + "/mlc/models/tiny/restart")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		roll = fleet.RollStatus{}
		if err := json.NewDecoder(resp.Body).Decode(&roll); err != nil {
			t.Fatal(err)
		}
		return roll.State != "running"
	})
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if roll.State != "done" || len(roll.Restarted) != 2 || roll.Current != "" {
		t.Errorf("roll: %+v", roll)
	}
	for addr, pid := range enginePIDs(t, admin) {
		if pid == pids[addr] || pid == 0 {
			t.Errorf("engine %s: pid %d, was %d", addr, pid, pids[addr])
		}
	}
	t.Logf("%d requests during the test, roll %+v", served.Load(), roll)
	if status, body := adminPost(t, admin+"/mlc/models/nosuch/restart"); status != http.StatusNotFound {
		t.Errorf("restart of an unknown model: %d %s", status, body)
	}
}

// enginePIDs are the engines' PIDs in GET /mlc/engines, by address.
func enginePIDs(t *testing.T, admin string) map[string]int {
	t.Helper()
	resp, err := http.Get(admin + "/mlc/engines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st []fleet.ModelStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range st {
		for _, e := range r.Engines {
			out[e.Addr] = e.PID
		}
	}
	return out
}
