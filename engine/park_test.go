//go:build linux

package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"
)

// An engine stopped before Start is left stopped while the others start;
// StartEngine brings it up with the world it always has (the same
// environment, so the same PE numbering), StopEngine takes it down again
// without touching the others, and a second start is a new process.
func TestFleetStartStopOneEngine(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1, 2)
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{7}}})
	if err := f.StopEngine(1); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readyEndpoints(f); !slices.Equal(got, []int{0}) || f.State(1) != StateStopped || !f.Parked(1) {
		t.Fatalf("after Start: ready %v, engine 1 %s parked %v", got, f.State(1), f.Parked(1))
	}
	other := f.PID(0)
	if err := f.StartEngine(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	first := f.PID(1)
	if !f.Ready(1) || first == 0 || f.Parked(1) {
		t.Fatalf("engine 1 after StartEngine: %s pid %d", f.State(1), first)
	}
	if err := f.StopEngine(1); err != nil {
		t.Fatal(err)
	}
	if f.State(1) != StateStopped || f.PID(1) != 0 {
		t.Fatalf("engine 1 after StopEngine: %s pid %d", f.State(1), f.PID(1))
	}
	assertGroupsGone(t, first)
	if err := f.StartEngine(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	if pid := f.PID(1); pid == first || pid == 0 {
		t.Errorf("second start: pid %d (first %d)", pid, first)
	}
	if f.PID(0) != other || f.Restarts(0) != 0 {
		t.Errorf("engine 0 disturbed: pid %d (was %d), restarts %d", f.PID(0), other, f.Restarts(0))
	}
	_, envs := h.scriptRecords(spec.Endpoints[1].Port)
	if len(envs) != 2 || !slices.Equal(nvshmemEnv(envs[0]), nvshmemEnv(envs[1])) || len(nvshmemEnv(envs[0])) == 0 {
		t.Errorf("the two starts' NVSHMEM environments differ: %q", envs)
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := f.StartEngine(t.Context(), 1); !errors.Is(err, ErrStopped) {
		t.Errorf("StartEngine after Stop: %v", err)
	}
}

// nvshmemEnv is the NVSHMEM and peers variables of an environment.
func nvshmemEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if len(kv) > 4 && kv[:4] == "MLC_" {
			out = append(out, kv)
		}
	}
	return out
}

// A StopEngine while the engine starts abandons the start: StartEngine
// fails at once, not at the startup timeout, and nothing is left running.
func TestFleetStopEngineAbandonsItsStart(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1, 1)
	spec.StartupTimeout = time.Hour
	t.Setenv(envHangPort, strconv.Itoa(spec.Endpoints[1].Port))
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.StopEngine(1); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- f.StartEngine(context.Background(), 1) }()
	h.waitFor("the engine to start", func() bool { return f.State(1) == StateStarting && f.PID(1) != 0 })
	pid := f.PID(1)
	if err := f.StopEngine(1); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err == nil {
		t.Error("StartEngine succeeded after a StopEngine")
	}
	if f.State(1) != StateStopped || f.PID(1) != 0 || !f.Ready(0) {
		t.Errorf("after: engine 1 %s pid %d, engine 0 %s", f.State(1), f.PID(1), f.State(0))
	}
	assertGroupsGone(t, pid)
}
