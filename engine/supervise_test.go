//go:build linux

package engine

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// transitions returns the states engine i went through.
func (h *harness) transitionsOf(i int) []State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.transitions[i])
}

// A stopped (SIGSTOP) engine answers nothing: it is unhealthy within a few
// health intervals, and after the hang timeout it is killed and restarted.
func TestFleetHungEngineIsRestarted(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1)
	spec.HealthInterval = 100 * time.Millisecond
	spec.HangTimeout = 1500 * time.Millisecond
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	old := f.PID(0)
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	h.waitFor("the stopped engine to be unhealthy", func() bool { return f.State(0) != StateReady })
	if s := f.State(0); s != StateUnhealthy {
		t.Fatalf("stopped engine is %s, want unhealthy first", s)
	}
	if d := time.Since(t0); d > 20*spec.HealthInterval {
		t.Errorf("unhealthy after %v, more than 20 health intervals", d)
	}
	h.waitFor("the hung engine to be restarted", func() bool { return f.Restarts(0) == 1 && f.Ready(0) })
	// Its last answer came at most an interval before the SIGSTOP.
	if d := time.Since(t0); d < spec.HangTimeout-spec.HealthInterval {
		t.Errorf("restarted %v after the SIGSTOP, before the hang timeout", d)
	}
	h.notePIDs()
	if f.PID(0) == old {
		t.Error("same pid after the restart")
	}
	assertGroupsGone(t, old)
	if h.logs.FilterMessageSnippet("engine hung").FilterField(zap.Int("pid", old)).Len() != 1 {
		t.Error("the kill of the hung engine was not logged with its pid")
	}
	want := []State{StateStarting, StateReady, StateUnhealthy, StateRestarting, StateReady}
	if got := h.transitionsOf(0); !slices.Equal(got, want) {
		t.Errorf("engine went through %v, want %v", got, want)
	}
}

// slowServer is an external engine whose /v1/models can be made to hang
// until the probe gives up; every such probe is counted on slowProbes.
func slowServer(t *testing.T) (Endpoint, *atomic.Bool, <-chan struct{}) {
	var slow atomic.Bool
	slowProbes := make(chan struct{}, 1000)
	ep := externalServerFunc(t, func(_ http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			<-r.Context().Done()
			slowProbes <- struct{}{}
		}
	})
	return ep, &slow, slowProbes
}

// While the router reports an engine serving, slow health probes do not
// take it out of rotation; once the traffic stops, they do.
func TestFleetServedExcusesSlowProbes(t *testing.T) {
	h := newHarness(t)
	ep, slow, slowProbes := slowServer(t)
	spec := Spec{Endpoints: []Endpoint{ep}, HealthInterval: 200 * time.Millisecond}
	f := h.newFleet(spec, Options{})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the engine to be ready", func() bool { return f.Ready(0) })
	slow.Store(true)
	traffic, stopTraffic := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { // the router's reports of a busy engine
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			f.Served(0)
			select {
			case <-traffic.Done():
				return
			case <-tick.C:
			}
		}
	})
	for range 2 * unhealthyAfter {
		select {
		case <-slowProbes:
		case <-time.After(waitTimeout):
			t.Fatal("no slow probe")
		}
	}
	stopTraffic()
	wg.Wait()
	if got, want := h.transitionsOf(0), []State{StateStarting, StateReady}; !slices.Equal(got, want) {
		t.Errorf("a serving engine went through %v, want %v", got, want)
	}
	h.waitFor("the engine without traffic to be unhealthy", func() bool { return f.State(0) == StateUnhealthy })
}

// Reconfigure changes the health interval of a running fleet at once, and
// refuses a spec that defines other processes.
func TestFleetReconfigure(t *testing.T) {
	h := newHarness(t)
	probes := make(chan struct{}, 1000)
	ep := externalServerFunc(t, func(http.ResponseWriter, *http.Request) { probes <- struct{}{} })
	spec := Spec{Endpoints: []Endpoint{ep}, HealthInterval: time.Hour}
	f := h.newFleet(spec, Options{})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the engine to be ready", func() bool { return f.Ready(0) })
	<-probes // the first check; the next is an hour away

	faster := spec
	faster.Endpoints = []Endpoint{ep}
	faster.Endpoints[0].Role = RoleDecode
	faster.HealthInterval = 20 * time.Millisecond
	faster.HangTimeout = time.Minute
	if err := f.Reconfigure(faster, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-probes:
		case <-time.After(waitTimeout):
			t.Fatal("the new health interval was not applied")
		}
	}
	if f.Endpoint(0).Role != RoleDecode {
		t.Errorf("role %q after Reconfigure", f.Endpoint(0).Role)
	}

	other := faster
	other.Endpoints = []Endpoint{ep}
	other.Endpoints[0].Port++
	if err := f.Reconfigure(other, nil); err == nil || !strings.Contains(err.Error(), "does not define this fleet's processes") {
		t.Errorf("Reconfigure with another port = %v", err)
	}
	if f.Endpoint(0).Port != ep.Port || f.settings().HealthInterval != faster.HealthInterval {
		t.Error("a refused Reconfigure changed the fleet")
	}
}

// hookedLogger returns an observed logger and a channel that receives
// every logged message containing snippet.
func hookedLogger(snippet string) (*zap.Logger, *observer.ObservedLogs, <-chan string) {
	core, logs := observer.New(zap.DebugLevel)
	seen := make(chan string, 100)
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if strings.Contains(e.Message, snippet) {
			seen <- e.Message
		}
		return nil
	})), logs, seen
}

// After Reconfigure, the engines' output and the fleet's events go to the
// new logger only: the old one's outputs may be closed.
func TestFleetReconfigureLogger(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1)
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	newLog, newLogs, seen := hookedLogger("after reconfigure")
	if err := f.Reconfigure(spec, newLog); err != nil {
		t.Fatal(err)
	}
	oldLen := h.logs.Len()
	resp, err := http.Get(spec.Endpoints[0].URL() + "/echo?line=" + url.QueryEscape("output after reconfigure"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-seen:
	case <-time.After(waitTimeout):
		t.Fatal("the engine's output did not reach the new logger")
	}
	line := newLogs.FilterMessage("output after reconfigure").All()
	if len(line) != 1 || line[0].Level != zapcore.DebugLevel || line[0].ContextMap()["engine"] != spec.Endpoints[0].Addr() {
		t.Errorf("output logged as %+v", line)
	}

	old := f.PID(0)
	syscall.Kill(old, syscall.SIGKILL)
	h.waitFor("the engine to be restarted", func() bool { return f.Restarts(0) == 1 && f.Ready(0) })
	h.notePIDs()
	if newLogs.FilterMessage("engine exited").Len() != 1 || newLogs.FilterMessageSnippet("fake engine: listening").Len() != 1 {
		t.Error("the exit and the new engine's output were not logged to the new logger")
	}
	if n := h.logs.Len(); n != oldLen {
		t.Errorf("the old logger got %d entries after Reconfigure: %v", n-oldLen, h.logs.All()[oldLen:])
	}
}

// Status never shows a ready engine without a process, nor with a dead one:
// from the moment the process is reaped, the engine is not ready.
func TestFleetStatusNeverReadyWhenDead(t *testing.T) {
	h := newHarness(t)
	f := h.newFleet(commandSpec(t, 1), Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	old, p := f.PID(0), f.engines[0].current()

	type sample struct {
		s   State
		pid int
	}
	var samples []sample
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			changed := f.Changed()
			s, pid := f.Status(0)
			if len(samples) == 0 || samples[len(samples)-1] != (sample{s, pid}) {
				samples = append(samples, sample{s, pid})
			}
			select {
			case <-done:
				return
			case <-changed:
			default:
				runtime.Gosched()
			}
		}
	}()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if s, pid := f.Status(0); s == StateReady || pid != 0 {
		t.Errorf("status (%s, %d) once the process is reaped", s, pid)
	}
	h.waitFor("the engine to be restarted", func() bool { return f.Restarts(0) == 1 && f.Ready(0) })
	h.notePIDs()
	close(done)
	<-sampled
	left := false
	for _, s := range samples {
		switch {
		case s.s == StateReady && s.pid == 0:
			t.Errorf("ready without a process: %v", samples)
		case s.pid == old && (left || s.s != StateReady):
			t.Errorf("the dead process %d seen as %s after the engine left it: %v", old, s.s, samples)
		case s.pid != old:
			left = true
		}
	}
	if last := samples[len(samples)-1]; last.s != StateReady || last.pid == old {
		t.Errorf("last status %v", last)
	}
}

// A panic in supervision is logged; supervision resumes and still restarts
// an engine that dies.
func TestFleetSupervisionSurvivesPanic(t *testing.T) {
	var calls atomic.Int32
	resumed := make(chan struct{})
	testHookSupervise = func(i int) {
		switch calls.Add(1) {
		case 1:
			panic("test panic in supervision")
		case 3:
			close(resumed)
		}
	}
	t.Cleanup(func() { testHookSupervise = nil }) // after the harness stops the fleet
	h := newHarness(t)
	spec := commandSpec(t, 1)
	spec.HealthInterval = 50 * time.Millisecond
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	old := f.PID(0)
	select {
	case <-resumed:
	case <-time.After(waitTimeout):
		t.Fatal("supervision did not resume after the panic")
	}
	panics := h.logs.FilterMessage("panic recovered in engine supervision").All()
	if len(panics) != 1 || panics[0].ContextMap()["panic"] != "test panic in supervision" {
		t.Fatalf("panic logged as %+v", panics)
	}
	if !f.Ready(0) || f.PID(0) != old {
		t.Error("the panic disturbed the engine")
	}
	syscall.Kill(old, syscall.SIGKILL)
	h.waitFor("the engine to be restarted", func() bool { return f.Restarts(0) == 1 && f.Ready(0) })
	h.notePIDs()
}

// A panic in a closure on the spawner's thread is returned as an error and
// does not end the thread, whose end would kill every engine (Pdeathsig).
func TestSpawnerSurvivesPanic(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	sp := newSpawner(func() *zap.Logger { return zap.New(core) })
	defer sp.close()
	var tid0, tid1 int
	sp.do(func() { tid0 = syscall.Gettid() })
	p, err := startProcess(sp, procConfig{program: "sleep", args: []string{"60"}, logger: zap.NewNop})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(0)
	if err := sp.do(func() { panic("test panic on the spawner") }); err == nil {
		t.Error("do returned no error for a panicking closure")
	}
	if err := sp.do(func() { tid1 = syscall.Gettid() }); err != nil || tid1 != tid0 {
		t.Fatalf("after the panic: err %v, thread %d, was %d", err, tid1, tid0)
	}
	if p.reaped() {
		t.Error("the child died with the panic")
	}
	if logs.FilterMessage("panic recovered in the engine spawner thread").Len() != 1 {
		t.Errorf("panic not logged: %v", logs.All())
	}
}

// A spawned engine that exits while another process answers its port does
// not pass for ready, even though its readiness probe was answered.
func TestFleetImpostorOnEnginePort(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1)
	port := strconv.Itoa(spec.Endpoints[0].Port)
	t.Setenv(envImpostorPort, port)
	t.Cleanup(func() { // the impostor has a session of its own
		paths, _ := filepath.Glob(filepath.Join(h.dir, "impostor-"+port+"-*.json"))
		for _, path := range paths {
			syscall.Kill(readRecord(t, h.dir, filepath.Base(path)).PID, syscall.SIGKILL)
		}
	})
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	err := f.Start(t.Context())
	if err == nil {
		t.Fatal("Start succeeded with an engine that died")
	}
	if !strings.Contains(err.Error(), "exited as it became ready (does another process answer on its port?)") {
		t.Errorf("Start = %v", err)
	}
	if f.State(0) != StateFailed {
		t.Errorf("state %s", f.State(0))
	}
}

// The instant a process is reaped, before its supervisor records the exit,
// the engine reads as restarting without a PID (or keeps a state that was
// not ready, without the PID).
func TestStatusOfReapedProcess(t *testing.T) {
	exited := make(chan struct{})
	p := &process{pid: 4242, exited: exited}
	for _, tc := range []struct{ state, alive, reaped State }{
		{StateReady, StateReady, StateRestarting},
		{StateUnhealthy, StateUnhealthy, StateRestarting},
		{StateStarting, StateStarting, StateStarting},
		{StateStopped, StateStopped, StateStopped},
	} {
		e := &engine{state: tc.state, proc: p}
		select {
		case <-exited:
		default:
			if s, pid := e.status(); s != tc.alive || pid != 4242 {
				t.Errorf("%s with a live process: (%s, %d)", tc.state, s, pid)
			}
			close(exited)
		}
		if s, pid := e.status(); s != tc.reaped || pid != 0 {
			t.Errorf("%s with a reaped process: (%s, %d), want (%s, 0)", tc.state, s, pid, tc.reaped)
		}
	}
}
