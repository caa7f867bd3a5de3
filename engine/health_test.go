//go:build linux

package engine

import (
	"context"
	"net/http"
	"net/url"
	"slices"
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
	// How fast is a timing figure (logged), not a CI assertion: a loaded
	// machine delays the probes' own goroutines.
	t.Logf("unhealthy %v after the SIGSTOP", time.Since(t0))
	h.waitFor("the hung engine to be restarted", func() bool { return f.Restarts(0) == 1 && f.Ready(0) })
	// Its last answer came at most an interval before the SIGSTOP.
	d := time.Since(t0)
	t.Logf("restarted and ready %v after the SIGSTOP (hang timeout %v)", d, spec.HangTimeout)
	if d < spec.HangTimeout-spec.HealthInterval {
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
