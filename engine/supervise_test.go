//go:build linux

package engine

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

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
		take := func() {
			s, pid := f.Status(0)
			if len(samples) == 0 || samples[len(samples)-1] != (sample{s, pid}) {
				samples = append(samples, sample{s, pid})
			}
		}
		for {
			changed := f.Changed()
			take()
			select {
			case <-done:
				take() // the state the test saw before it closed done
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
	hook := func(i int) {
		switch calls.Add(1) {
		case 1:
			panic("test panic in supervision")
		case 3:
			close(resumed)
		}
	}
	h := newHarness(t)
	spec := commandSpec(t, 1)
	spec.HealthInterval = 50 * time.Millisecond
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}, OnSuperviseTick: hook})
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
