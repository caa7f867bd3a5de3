//go:build linux

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// externalServer is an engine run by someone else, whose health we switch.
func externalServer(t *testing.T) (Endpoint, *atomic.Int32) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	ep := externalServerFunc(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	})
	return ep, &status
}

// externalServerFunc is an engine run by someone else whose GET /v1/models
// is fn.
func externalServerFunc(t *testing.T, fn http.HandlerFunc) Endpoint {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		fn(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return Endpoint{Host: u.Hostname(), Port: port, GPUs: 1, External: true}
}

func TestFleetExternalEndpoint(t *testing.T) {
	h := newHarness(t)
	ep, status := externalServer(t)
	f := h.newFleet(Spec{Endpoints: []Endpoint{ep}, HealthInterval: 20 * time.Millisecond}, Options{})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("external engine ready", func() bool { return f.Ready(0) })
	status.Store(http.StatusServiceUnavailable)
	h.waitFor("external engine unhealthy", func() bool { return f.State(0) == StateUnhealthy })
	status.Store(http.StatusOK)
	h.waitFor("external engine ready again", func() bool { return f.Ready(0) })
	if f.PID(0) != 0 || f.Restarts(0) != 0 {
		t.Error("external engine was spawned or restarted")
	}
	f.Stop()
	if f.State(0) != StateStopped {
		t.Errorf("state after Stop: %s", f.State(0))
	}
}

func TestFleetStartStopIdempotent(t *testing.T) {
	h := newHarness(t)
	ep, _ := externalServer(t)
	f := h.newFleet(Spec{Endpoints: []Endpoint{ep}}, Options{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = f.Start(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Go(func() { f.Stop() })
	f.Stop()
	wg.Wait()

	g := h.newFleet(Spec{Endpoints: []Endpoint{ep}}, Options{})
	g.Stop()
	if err := g.Start(t.Context()); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestSpawnerUsesOneThread(t *testing.T) {
	sp := newSpawner(zap.NewNop)
	defer sp.close()
	tids := make([]int, 8)
	var wg sync.WaitGroup
	for i := range tids {
		wg.Go(func() { sp.do(func() { tids[i] = syscall.Gettid() }) })
	}
	wg.Wait()
	for _, tid := range tids {
		if tid != tids[0] {
			t.Fatalf("processes forked from threads %v", tids)
		}
	}
	if err := sp.do(func() {}); err != nil {
		t.Fatal(err)
	}
}

func TestFleetStartCanceled(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1)
	t.Setenv(envHangPort, strconv.Itoa(spec.Endpoints[0].Port))
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	ctx, cancel := context.WithCancel(t.Context())
	changed := f.Changed()
	go func() {
		<-changed // the engine is starting
		cancel()
	}()
	if err := f.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, want context.Canceled", err)
	}
	if f.State(0) != StateStopped {
		t.Errorf("state %s after a canceled Start", f.State(0))
	}
}

func TestFleetPortInUse(t *testing.T) {
	h := newHarness(t)
	spec := commandSpec(t, 1)
	ln, err := net.Listen("tcp", spec.Endpoints[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := h.newFleet(spec, Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("Start = %v, want ErrPortInUse", err)
	}
	if argvs, _ := h.scriptRecords(spec.Endpoints[0].Port); len(argvs) != 0 {
		t.Error("an engine was spawned on a taken port")
	}
}

// The kernel sends Pdeathsig when the thread that forked the child exits.
// The spawner's thread exits when it is closed, so its children must die
// then: this shows both that Pdeathsig is set and which thread it follows.
func TestPdeathsigFollowsSpawnerThread(t *testing.T) {
	sp := newSpawner(zap.NewNop)
	p, err := startProcess(sp, procConfig{program: "sleep", args: []string{"60"}, logger: zap.NewNop})
	if err != nil {
		sp.close()
		t.Fatal(err)
	}
	sp.close()
	select {
	case <-p.exited:
	case <-time.After(waitTimeout):
		p.stop(0)
		t.Fatal("child survived the thread that forked it")
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("child ended with %v, want SIGKILL", p.waitErr)
	}
}

func TestFleetEngineOutputNeverBlocks(t *testing.T) {
	h := newHarness(t)
	t.Setenv(envSpam, "1")
	f := h.newFleet(commandSpec(t, 1), Options{UIDSource: &fixedUID{uid: []int{1}}})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h.logs.FilterMessage("spam done").Len() != 1 {
		t.Error("the last line before listening was not logged")
	}
	if h.logs.FilterField(zap.Bool("truncated", true)).Len() != 1 {
		t.Error("the 1 MiB line was not logged truncated")
	}
}
