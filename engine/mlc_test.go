//go:build linux

package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestFleetMLCWithUIDHelper(t *testing.T) {
	h := newHarness(t)
	python, _ := filepath.Abs("testdata/fake-python.sh")
	spec := Spec{Model: "m", Kind: KindMLC, Program: python, Endpoints: localEndpoints(t, 1, 1),
		HealthInterval: 100 * time.Millisecond, StartupTimeout: waitTimeout}
	twoGPUs := func(*zap.Logger) ([]GPU, error) { return make([]GPU, 2), nil }
	f := h.newFleet(spec, Options{Inventory: twoGPUs})
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.notePIDs()
	helpers, _ := filepath.Glob(filepath.Join(h.dir, "helper-*.json"))
	if len(helpers) != 1 {
		t.Fatalf("%d uid helpers ran", len(helpers))
	}
	hrec := readRecord(t, h.dir, filepath.Base(helpers[0]))
	h.pids = append(h.pids, hrec.PID)
	if len(hrec.Argv) != 2 || hrec.Argv[0] != "-c" || !strings.Contains(hrec.Argv[1], `get_global_func("runtime.disco.nvshmem.init_nvshmem_uid")`) {
		t.Errorf("helper argv %q", hrec.Argv)
	}
	for i, ep := range spec.Endpoints {
		rec := readRecord(t, h.dir, fmt.Sprintf("engine-%d-%d.json", ep.Port, f.PID(i)))
		if !slices.Equal(rec.Argv[:5], []string{"-m", "mlc_llm", "serve", "m", "--device"}) || rec.Argv[5] != "cuda:"+strconv.Itoa(i) {
			t.Errorf("argv %q", rec.Argv)
		}
		checkEnv(t, envMap(rec.Env), KindMLC, fakeUID, 2, i, spec.Endpoints)
	}
	f.Stop()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", hrec.PID)); err == nil {
		t.Error("uid helper outlived Stop")
	}
}

func TestFleetMLCNotEnoughGPUs(t *testing.T) {
	h := newHarness(t)
	spec := Spec{Model: "m", Kind: KindMLC, Program: "/nonexistent/python", Endpoints: localEndpoints(t, 1, 1)}
	oneGPU := func(*zap.Logger) ([]GPU, error) { return make([]GPU, 1), nil }
	f := h.newFleet(spec, Options{Inventory: oneGPU})
	if err := f.Start(t.Context()); !errors.Is(err, ErrNotEnoughGPUs) {
		t.Fatalf("Start = %v, want ErrNotEnoughGPUs", err)
	}
}

func readRecord(t *testing.T, dir, name string) record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := jsonUnmarshal(string(b), &r); err != nil {
		t.Fatal(err)
	}
	return r
}
