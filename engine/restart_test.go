//go:build linux

package engine

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// Restart stops one engine and starts it again at once, with the same
// command line and world, without the backoff or the error of a crash;
// the other engines are not disturbed. An external engine is refused.
func TestFleetRestartOnRequest(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1, 1)
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{7}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	old, other := f.PID(1), f.PID(0)
	begin := time.Now()
	if err := f.Restart(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	if pid := f.PID(1); pid == old || pid == 0 || !f.Ready(1) {
		t.Errorf("engine 1 after the restart: pid %d (was %d), %s", pid, old, f.State(1))
	}
	assertGroupsGone(t, old)
	if f.PID(0) != other || f.Restarts(0) != 0 || f.Restarts(1) != 1 {
		t.Errorf("restarts %d, %d; engine 0 pid %d, was %d", f.Restarts(0), f.Restarts(1), f.PID(0), other)
	}
	h.mu.Lock()
	tr := h.transitions[1]
	h.mu.Unlock()
	if want := []State{StateStarting, StateReady, StateRestarting, StateReady}; !slices.Equal(tr, want) {
		t.Errorf("engine 1 went through %v, want %v", tr, want)
	}
	if n := h.logs.FilterMessage("engine exited").Len(); n != 0 {
		t.Errorf("a restart on request logged %d crashes", n)
	}
	argvs, _ := h.scriptRecords(spec.Endpoints[1].Port)
	if len(argvs) != 2 || !slices.Equal(argvs[0], argvs[1]) {
		t.Errorf("restart argv %q", argvs)
	}
	t.Logf("restarted in %v", time.Since(begin).Round(time.Millisecond))

	ep, _ := externalServer(t)
	g, err := New(Spec{Endpoints: []Endpoint{ep}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if err := g.Restart(t.Context(), 0); !errors.Is(err, ErrExternal) {
		t.Errorf("restart of an external engine: %v", err)
	}
}
