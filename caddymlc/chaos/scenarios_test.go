package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pick returns the short form's value, or the long form's with -chaos.long.
func pick[T any](short, longForm T) T {
	if *long {
		return longForm
	}
	return short
}

// disaggEngines is one prefill and two decode engines.
var disaggEngines = []string{"role prefill", "role decode", "role decode"}

// finish reports the scenario, holds the long form to its stall goal, and
// checks that nothing is left behind.
func (r *rig) finish(ta *tally, name string, stallGoal time.Duration) {
	r.t.Helper()
	ta.report(r.t, name)
	if *long && ta.worst > stallGoal {
		r.t.Errorf("%s: worst stall %v, goal %v", name, ta.worst, stallGoal)
	}
	r.quiesce(pick(30*time.Second, 5*time.Second))
	r.checkGoroutines()
}

// loop keeps n clients sending jobs (client i sends jobs[i%len(jobs)])
// until stop is closed, and returns when they are done.
func (r *rig) loop(n int, jobs []job, refs []string, ta *tally, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (c + k*n) % len(jobs)
				ta.add(r.do(context.Background(), jobs[i], r.base), refs[i])
			}
		})
	}
	return wg.Wait
}

// Storm: a KV cache of 256 tokens per engine, one prefill and two decode
// engines, and a burst of concurrent requests, streamed and not,
// completions and chat. Engines preempt all the time; every text is
// exact, and nothing waits long.
func TestStorm(t *testing.T) {
	n := pick(40, 200)
	r := newRig(t, rigConfig{endpoints: disaggEngines,
		routerOpts: "\t\tengine_args --overrides max_total_seq_length=256\n\t\tmax_attempts 64\n"})
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{chat: i%4 >= 2, stream: i%2 == 0, maxTokens: 24 + i%24,
			prompt: fmt.Sprintf("storm %d: the wind over the grey sea and the boats", i)}
	}
	refs := r.references(jobs)
	var ta tally
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { ta.add(r.do(context.Background(), j, r.base), refs[i]) })
	}
	wg.Wait()
	r.finish(&ta, "storm", 5*time.Second)
}

// longJobs are streamed completions long enough to outlast a fault.
func longJobs(n, tokens int) []job {
	jobs := make([]job, n)
	for i := range jobs {
		jobs[i] = job{stream: true, maxTokens: tokens, prompt: fmt.Sprintf("long %d: a road through the hills to the coast", i)}
	}
	return jobs
}

// Decode kills: a decode engine is SIGKILLed again and again while
// streams run; each stream resumes on the other decode engine, exactly.
func TestDecodeKills(t *testing.T) {
	clients, kills := pick(6, 20), pick(3, 10)
	r := newRig(t, rigConfig{endpoints: disaggEngines})
	jobs := longJobs(clients, 120)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(clients, jobs, refs, &ta, stop)
	decodes := []int{1, 2}
	for k := range kills {
		victim := decodes[k%2]
		r.waitEngine(decodes[(k+1)%2]) // the other one serves meanwhile
		e := r.waitBusy(victim)
		if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r.waitRestarted(victim, e.PID)
	}
	close(stop)
	wait()
	r.finish(&ta, "decode-kills", 2*time.Second)
}

// waitBusy waits until engine i serves a request, and returns it.
func (r *rig) waitBusy(i int) engineStatus {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		e := r.status().Engines[i]
		if e.State == "ready" && e.InFlight > 0 && e.PID != 0 {
			return e
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("engine %d never got a request: %+v", i, e)
		}
		time.Sleep(5 * time.Millisecond) // the clients' next request, seen through the admin API
	}
}

// waitRestarted waits until engine i runs again under another pid.
func (r *rig) waitRestarted(i, oldPID int) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		e := r.status().Engines[i]
		if e.State == "ready" && e.PID != 0 && e.PID != oldPID {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("engine %d not restarted: %+v", i, e)
		}
		time.Sleep(20 * time.Millisecond) // the fleet restarts it with backoff
	}
}

// Prefill kill: the prefill engine is SIGKILLed under load, then again
// while idle. Requests go on (the decode engines prefill while it is
// down) and the first request after the idle kill is served at once: no
// reservation is left to time out.
func TestPrefillKill(t *testing.T) {
	clients := pick(4, 10)
	r := newRig(t, rigConfig{endpoints: disaggEngines})
	jobs := longJobs(clients, 60)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(clients, jobs, refs, &ta, stop)
	e := r.waitBusy(0)
	if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.waitRestarted(0, e.PID)
	close(stop)
	wait()
	r.quiesce(30 * time.Second)

	e = r.waitEngine(0)
	if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res := r.do(context.Background(), jobs[i], r.base)
		ta.add(res, refs[i])
		if res.took > pick(20*time.Second, 2*time.Second) {
			t.Errorf("request %d after the idle kill took %v", i, res.took)
		}
	}
	r.waitRestarted(0, e.PID)
	r.finish(&ta, "prefill-kill", 2*time.Second)
}

// Frozen engines: a decode engine is stopped (SIGSTOP) while streams run,
// then the prefill engine. Streams on the frozen engine resume elsewhere
// once it has been silent for engine_timeout; nothing waits much longer.
func TestFrozenEngines(t *testing.T) {
	const engineTimeout = 2 * time.Second
	freeze := pick(4*time.Second, 30*time.Second)
	clients := 10
	r := newRig(t, rigConfig{endpoints: disaggEngines, routerOpts: "\t\tengine_timeout 2s\n"})
	jobs := longJobs(clients, 120)
	refs := r.references(jobs)
	var ta tally
	for _, victim := range []int{1, 0} { // a decode engine, then the prefill engine
		stop := make(chan struct{})
		wait := r.loop(clients, jobs, refs, &ta, stop)
		e := r.waitBusy(victim)
		if err := syscall.Kill(e.PID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		thaw := func() { _ = syscall.Kill(e.PID, syscall.SIGCONT) } // it may have been killed as hung
		t.Cleanup(thaw)
		time.Sleep(freeze) // the fault's duration: the clients keep going meanwhile
		thaw()
		close(stop)
		wait()
		r.waitEngine(victim)
	}
	r.finish(&ta, "frozen", engineTimeout+time.Second)
}

// Disconnects: clients leave at random points, some during prefill or
// the KV transfer, some mid-stream. Within a second every reservation and
// KV page is free and the counts are zero; the next request runs at
// normal speed.
func TestDisconnects(t *testing.T) {
	n := pick(30, 100)
	r := newRig(t, rigConfig{endpoints: disaggEngines})
	prompt := strings.Repeat("the slow river carries the boats to the sea ", 12)
	normal := r.do(context.Background(), job{prompt: prompt, maxTokens: 16}, r.base)
	if normal.err != "" {
		t.Fatal(normal.err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var ended atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		after := time.Duration(rng.IntN(400)) * time.Millisecond
		j := job{stream: i%3 != 0, maxTokens: 200, prompt: fmt.Sprintf("%d %s", i, prompt)}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), after)
			defer cancel()
			r.do(ctx, j, r.base)
			ended.Add(1)
		})
	}
	wg.Wait()
	took := r.quiesce(pick(10*time.Second, time.Second))
	res := r.do(context.Background(), job{prompt: prompt, maxTokens: 16}, r.base)
	if res.err != "" || res.text != normal.text {
		t.Fatalf("the request after the disconnects: %q %s", res.text, res.err)
	}
	if res.took > 5*normal.took+pick(5*time.Second, 500*time.Millisecond) {
		t.Errorf("the request after the disconnects took %v, %v before them", res.took, normal.took)
	}
	fmt.Printf("chaos disconnects: requests=%d ended=%d errors=0 freed_within=%v next_request=%v (before: %v)\n",
		n, ended.Load(), took.Round(time.Millisecond), res.took.Round(time.Millisecond), normal.took.Round(time.Millisecond))
	r.checkGoroutines()
}

// Slow probe: an engine whose GET /v1/models turns slow (an overloaded
// server) but that serves completions normally stays in rotation: no
// request gets a 503, none waits.
func TestSlowProbe(t *testing.T) {
	engineAddr := freeAddr(t)
	startEngine(t, engineAddr)
	var slow atomic.Bool
	target, _ := url.Parse("http://" + engineAddr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/models" && slow.Load() {
			select {
			case <-time.After(6 * time.Second):
			case <-req.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(proxy.Close)
	r := newRig(t, rigConfig{external: []string{strings.TrimPrefix(proxy.URL, "http://") + " external"},
		routerOpts: "\t\tmode whole\n"})
	slow.Store(true)
	clients := 4
	jobs := longJobs(clients, 24)
	refs := r.references(jobs)
	var ta tally
	stop := make(chan struct{})
	wait := r.loop(clients, jobs, refs, &ta, stop)
	time.Sleep(pick(8*time.Second, 30*time.Second)) // several health intervals of slow probes, under traffic
	close(stop)
	wait()
	if e := r.status().Engines[0]; e.State != "ready" {
		t.Errorf("the engine with slow probes is %s", e.State)
	}
	slow.Store(false)
	r.finish(&ta, "slow-probe", 2*time.Second)
}

// startEngine runs a built-in engine the test owns (the test binary
// re-executed) on addr, and waits until it answers.
func startEngine(t *testing.T, addr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(exe, "mlc-engine", "tiny", "--enable-debug", "--host", host, "--port", port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/v1/models")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine on %s did not start: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // a process starting up
	}
}
