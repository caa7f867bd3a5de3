//go:build linux

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// waitTimeout bounds every wait of the process tests.
const waitTimeout = 30 * time.Second

// fixedUID is a UIDSource with a known id that counts Close calls.
type fixedUID struct {
	uid    []int
	mu     sync.Mutex
	closed int
}

func (u *fixedUID) UID(context.Context) ([]int, error) { return u.uid, nil }

func (u *fixedUID) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed++
	return nil
}

// harness runs one fleet of fake engines in a test.
type harness struct {
	t    *testing.T
	dir  string // records of the fake processes
	f    *Fleet
	logs *observer.ObservedLogs

	mu          sync.Mutex
	transitions map[int][]State
	pids        []int // every engine pid seen, for the process group check
}

// newHarness sets up the record directory and the environment of the fakes.
func newHarness(t *testing.T) *harness {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: t.TempDir(), transitions: map[int][]State{}}
	t.Setenv(envRecordDir, h.dir)
	t.Setenv(envBinary, exe)
	return h
}

// newFleet creates the fleet; Cleanup stops it and checks for survivors.
func (h *harness) newFleet(spec Spec, opts Options) *Fleet {
	h.t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	h.logs = logs
	opts.Logger = zap.New(core)
	opts.OnStateChange = func(i int, _, to State) {
		h.mu.Lock()
		h.transitions[i] = append(h.transitions[i], to)
		h.mu.Unlock()
	}
	f, err := New(spec, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.f = f
	h.t.Cleanup(func() {
		f.Stop()
		assertNoChildren(h.t, h.pids...)
	})
	return f
}

// notePIDs remembers the current engine pids.
func (h *harness) notePIDs() {
	for i := range h.f.Len() {
		if pid := h.f.PID(i); pid != 0 {
			h.pids = append(h.pids, pid)
		}
	}
}

// waitFor waits, on the fleet's change notifications, until cond holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		changed := h.f.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// readScriptRecord returns the argv and env recorded by the
// record-and-exec script for the engine on port, oldest first.
func (h *harness) scriptRecords(port int) (argvs, envs [][]string) {
	h.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(h.dir, "script-*.argv"))
	slices.SortFunc(paths, func(a, b string) int { return modTime(a).Compare(modTime(b)) })
	for _, p := range paths {
		argv := readNULList(h.t, p)
		if flagValue(argv, "--port") == strconv.Itoa(port) {
			argvs = append(argvs, argv)
			envs = append(envs, readNULList(h.t, strings.TrimSuffix(p, ".argv")+".env"))
		}
	}
	return argvs, envs
}

func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func readNULList(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// localEndpoints returns endpoints on free local ports with these GPUs.
func localEndpoints(t *testing.T, gpus ...int) []Endpoint {
	eps := make([]Endpoint, len(gpus))
	for i, g := range gpus {
		eps[i] = Endpoint{Host: "127.0.0.1", Port: freePort(t), GPUs: g}
	}
	return eps
}

// commandSpec is a fleet of "engine command record-and-exec.sh".
func commandSpec(t *testing.T, gpus ...int) Spec {
	script, err := filepath.Abs("testdata/record-and-exec.sh")
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Model: "dist/fake-model", ModelLib: "fake.so", Kind: KindCommand,
		Program: script, Args: []string{"--wrapper-flag", "a b"},
		EngineArgs:      []string{"--max-num-sequence", "4"},
		PrefixCacheMode: PrefixCacheRadix, Endpoints: localEndpoints(t, gpus...),
		// A health interval long enough that a loaded machine never fails a
		// probe: tests that want checks set their own.
		StartupTimeout: waitTimeout, StopGrace: 5 * time.Second, HealthInterval: time.Second,
	}
}

// readyEndpoints returns the indexes of the ready engines, in order.
func readyEndpoints(f *Fleet) []int {
	var ready []int
	for i := range f.Len() {
		if f.Ready(i) {
			ready = append(ready, i)
		}
	}
	return ready
}

func TestFleetCommandEngines(t *testing.T) {
	h := newHarness(t)
	t.Setenv(envGrandchild, "1") // Stop and restarts must take it down too
	uid := &fixedUID{uid: []int{9, 8, 7, 0, 255}}
	spec := commandSpec(t, 2, 1, 1)
	f := h.newFleet(spec, Options{UIDSource: uid})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	if got := readyEndpoints(f); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("ReadyEndpoints = %v", got)
	}
	for i, ep := range spec.Endpoints {
		checkCommandRecord(t, h, spec, i, uid.uid)
		msg := fmt.Sprintf("engine %d/3 %s ready", i+1, ep.Addr())
		if h.logs.FilterMessage(msg).Len() != 1 {
			t.Errorf("no log %q", msg)
		}
	}
	out := h.logs.FilterField(zap.String("engine", spec.Endpoints[2].Addr())).FilterField(zap.String("stream", "stdout"))
	if out.FilterMessageSnippet("fake engine: listening on").Len() == 0 {
		t.Error("engine stdout not logged with engine and stream fields")
	}
	testRestart(t, h, spec, uid.uid)
	f.Stop()
	for i := range spec.Endpoints {
		if f.State(i) != StateStopped || f.PID(i) != 0 {
			t.Errorf("after Stop engine %d is %s, pid %d", i, f.State(i), f.PID(i))
		}
	}
	if uid.closed != 1 {
		t.Errorf("uid source closed %d times", uid.closed)
	}
	assertNoChildren(t, h.pids...)
}

// checkCommandRecord checks the argv and env of engine i, exactly.
func checkCommandRecord(t *testing.T, h *harness, spec Spec, i int, uid []int) {
	t.Helper()
	ep := spec.Endpoints[i]
	argvs, envs := h.scriptRecords(ep.Port)
	if len(argvs) != 1 {
		t.Fatalf("engine %d started %d times", i, len(argvs))
	}
	start := spec.DeviceIDStarts()[i]
	want := []string{"--wrapper-flag", "a b", "dist/fake-model", "--model-lib", "fake.so",
		"--device", "cuda:" + strconv.Itoa(start), "--enable-debug", "--mode", "server",
		"--prefix-cache-mode", "radix", "--overrides", "gpu_memory_utilization=0.8",
		"--host", "127.0.0.1", "--port", strconv.Itoa(ep.Port), "--max-num-sequence", "4"}
	if !slices.Equal(argvs[0], want) {
		t.Errorf("engine %d argv\n got %q\nwant %q", i, argvs[0], want)
	}
	checkEnv(t, envMap(envs[0]), KindCommand, uid, 4, start, spec.Endpoints)
}

// testRestart kills engine 1 and waits until it is back.
func testRestart(t *testing.T, h *harness, spec Spec, uid []int) {
	f := h.f
	old := f.PID(1)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.waitFor("engine 1 to be restarted", func() bool { return f.Restarts(1) == 1 && f.State(1) == StateReady })
	assertGroupsGone(t, old) // the killed engine's own child is gone as well
	h.notePIDs()
	h.mu.Lock()
	tr := h.transitions[1]
	h.mu.Unlock()
	if want := []State{StateStarting, StateReady, StateRestarting, StateReady}; !slices.Equal(tr, want) {
		t.Errorf("engine 1 went through %v, want %v", tr, want)
	}
	if f.PID(1) == old || f.PID(1) == 0 {
		t.Errorf("engine 1 pid %d after restart, was %d", f.PID(1), old)
	}
	if f.Restarts(0) != 0 || f.Restarts(2) != 0 || !f.Ready(0) || !f.Ready(2) {
		t.Error("the other engines were disturbed")
	}
	argvs, envs := h.scriptRecords(spec.Endpoints[1].Port)
	if len(argvs) != 2 || !slices.Equal(argvs[0], argvs[1]) {
		t.Fatalf("restart argv %q", argvs)
	}
	checkEnv(t, envMap(envs[1]), KindCommand, uid, 4, 2, spec.Endpoints)
}

func TestFleetEngineExitsAtStartup(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1, 1, 1)
	t.Setenv(envExitPort, strconv.Itoa(spec.Endpoints[1].Port))
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	t0 := time.Now()
	err := f.Start(t.Context())
	if err == nil {
		t.Fatal("Start succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		"engine " + spec.Endpoints[1].Addr() + " exited before it was ready",
		"exit status 3", "dying line 11\n", "dying line 30",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "dying line 10\n") {
		t.Errorf("error quotes more than %d lines:\n%s", tailLines, msg)
	}
	if d := time.Since(t0); d > waitTimeout/2 {
		t.Errorf("Start took %v to notice the exit", d)
	}
	if f.State(1) != StateFailed || f.State(0) != StateStopped {
		t.Errorf("states %s, %s; want failed, stopped", f.State(1), f.State(0))
	}
	if err2 := f.Start(t.Context()); err2 != err {
		t.Errorf("second Start = %v, want the first error", err2)
	}
}

func TestFleetStartupTimeout(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1, 1)
	spec.StartupTimeout = time.Second
	t.Setenv(envHangPort, strconv.Itoa(spec.Endpoints[0].Port))
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}, StartingLogInterval: 300 * time.Millisecond})
	t0 := time.Now()
	err := f.Start(t.Context())
	if !errors.Is(err, ErrStartupTimeout) {
		t.Fatalf("Start = %v, want ErrStartupTimeout", err)
	}
	for _, want := range []string{spec.Endpoints[0].Addr(), "fake engine: hanging"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if d := time.Since(t0); d < time.Second || d > 10*time.Second {
		t.Errorf("Start failed after %v", d)
	}
	progress := h.logs.FilterMessage(fmt.Sprintf("engine 1/2 %s still starting", spec.Endpoints[0].Addr())).All()
	if len(progress) == 0 {
		t.Fatal("no progress log while the engine was starting")
	}
	if e, ok := progress[0].ContextMap()["elapsed"].(string); !ok || !strings.HasSuffix(e, "s") {
		t.Errorf("progress log without a human elapsed time: %v", progress[0].ContextMap())
	}
}

func TestFleetStopEscalatesToSIGKILL(t *testing.T) {
	h := newHarness(t)
	t.Setenv(envIgnoreTerm, "1")
	spec := commandSpec(t, 1)
	spec.StopGrace = 300 * time.Millisecond
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	t0 := time.Now()
	f.Stop()
	if d := time.Since(t0); d < spec.StopGrace {
		t.Errorf("Stop took %v; the engine ignores SIGTERM, so it should wait the grace period", d)
	}
	assertNoChildren(t, h.pids...)
}

func TestFleetBuiltinEngine(t *testing.T) {
	h := newHarness(t)
	t.Setenv(envFakeEngine, "1") // the builtin program is the test binary
	exe, _ := os.Executable()
	spec := Spec{Model: "m", Kind: KindBuiltin, Program: exe, Endpoints: localEndpoints(t, 1, 2),
		HealthInterval: 100 * time.Millisecond, StartupTimeout: waitTimeout}
	f := h.newFleet(spec, Options{})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	var uid []int
	for i, ep := range spec.Endpoints {
		rec := readRecord(t, h.dir, fmt.Sprintf("engine-%d-%d.json", ep.Port, f.PID(i)))
		want := []string{"mlc-engine", "m", "--device", "cpu", "--enable-debug", "--mode", "server",
			"--prefix-cache-mode", "radix", "--host", "127.0.0.1", "--port", strconv.Itoa(ep.Port)}
		if !slices.Equal(rec.Argv, want) {
			t.Errorf("argv %q, want %q", rec.Argv, want)
		}
		env := envMap(rec.Env)
		var cfg protocol.NVSHMEMConfig
		if err := jsonUnmarshal(env[protocol.EnvNVSHMEMConfig], &cfg); err != nil {
			t.Fatal(err)
		}
		if uid == nil {
			uid = cfg.UID
		}
		if len(cfg.UID) != UIDSize {
			t.Errorf("uid of %d bytes", len(cfg.UID))
		}
		checkEnv(t, env, KindBuiltin, uid, 3, i, spec.Endpoints)
	}
	started := h.logs.FilterMessage("engine fleet started").All()
	if len(started) != 1 {
		t.Fatalf("%d start logs", len(started))
	}
	if m := started[0].ContextMap(); m["pes"] != int64(3) || m["gpus"] != nil {
		t.Errorf("builtin fleet start logged %v, want pes=3 and no gpus", m)
	}
}
