package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// Stalled readers: clients open long streams and read nothing. With
// client_timeout 3s they are let go: their engines stop and free their
// KV while they still hold their connections, and a normal client beside
// them is served as before (long form goal: worst wait for text under
// 1 s).
func TestStalledReaders(t *testing.T) {
	r := newRig(t, rigConfig{endpoints: disaggEngines, routerOpts: "\t\tmode disagg\n\t\tclient_timeout 3s\n"})
	addr := strings.TrimPrefix(r.base, "http://")
	body, _ := json.Marshal(map[string]any{"prompt": "a long long story about the sea", "max_tokens": 2000, "temperature": 0, "stream": true})
	jobs := longJobs(4, 16)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(2, jobs, refs, &ta, stop)
	n := pick(10, 50)
	for range n {
		testnet.StalledClient(t, addr, fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body))
	}
	// The stalled streams are let go after client_timeout; until then
	// normal clients run beside them.
	took := r.quiesceBeside(&ta, stop, wait, time.Minute)
	fmt.Printf("chaos stalled-readers: stalled=%d freed_after=%v\n", n, took.Round(time.Millisecond))
	r.finish(&ta, "stalled-readers-normal-clients", time.Second)
}

// quiesceBeside stops the normal clients once nothing but them is left
// on the engines (the stalled streams were let go), and returns how long
// that took.
func (r *rig) quiesceBeside(ta *tally, stop chan struct{}, wait func(), within time.Duration) time.Duration {
	r.t.Helper()
	begin := time.Now()
	deadline := begin.Add(within)
	for {
		st := r.status()
		var inflight int64
		for _, e := range st.Engines {
			inflight += e.InFlight
		}
		if inflight <= 2 { // at most the two normal clients
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wait()
			r.t.Fatalf("stalled streams still held %v after they began: %d calls in flight", within, inflight)
		}
		time.Sleep(50 * time.Millisecond) // the router's own timeout is what is waited on
	}
	close(stop)
	wait()
	return time.Since(begin)
}

// Slow bodies: a chunked body that never ends, and a Content-Length
// larger than what is sent, each get a 408 within body_timeout and their
// connection is closed, while normal clients are served.
func TestSlowBodies(t *testing.T) {
	r := newRig(t, rigConfig{endpoints: []string{"", ""}, routerOpts: "\t\tmode whole\n\t\tbody_timeout 2s\n"})
	addr := strings.TrimPrefix(r.base, "http://")
	jobs := longJobs(2, 16)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(2, jobs, refs, &ta, stop)
	var worst time.Duration
	for i := range pick(4, 20) {
		head := "Transfer-Encoding: chunked\r\n\r\n10\r\n{\"prompt\":\"the \r\n"
		if i%2 == 1 {
			head = "Content-Length: 100\r\n\r\n{\"prompt\":\"the "
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s", addr, head)
		_ = conn.SetReadDeadline(begin.Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("slow body %d: no answer within 30 s: %v", i, err)
		}
		resp.Body.Close()
		conn.Close()
		worst = max(worst, time.Since(begin))
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("slow body %d: status %d", i, resp.StatusCode)
		}
	}
	close(stop)
	wait()
	fmt.Printf("chaos slow-bodies: answered_worst=%v\n", worst.Round(time.Millisecond))
	if worst > 30*time.Second {
		t.Errorf("a slow body was answered after %v", worst)
	}
	r.finish(&ta, "slow-bodies-normal-clients", time.Second)
}
