package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The GPUs of an `engine mlc` fleet are read into gauges labelled with
// the engine that uses them: engine 0 has devices 0 and 1, engine 1
// device 2. The machines that run the tests have no GPU: NVML is faked.
func TestGPUMetricsPerEngine(t *testing.T) {
	spec := Spec{Model: "HF://some/model", Kind: KindMLC, Endpoints: []Endpoint{
		{Host: "127.0.0.1", Port: 9001, GPUs: 2}, {Host: "127.0.0.1", Port: 9002, GPUs: 1},
	}}.Normalize()
	sample := func() ([]GPUSample, error) {
		return []GPUSample{
			{Index: 0, MemoryUsed: 10 << 30, MemoryTotal: 80 << 30, Utilization: 0.5},
			{Index: 1, MemoryUsed: 20 << 30, MemoryTotal: 80 << 30, Utilization: 0.25},
			{Index: 2, MemoryUsed: 30 << 30, MemoryTotal: 80 << 30, Utilization: 1},
			{Index: 3, MemoryUsed: 1, MemoryTotal: 2}, // not the fleet's
		}, nil
	}
	f, err := New(spec, Options{SampleGPUs: sample})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sampleGPUsOnce(); err != nil {
		t.Fatal(err)
	}
	g := sharedGPUMetrics()
	for _, c := range []struct {
		engine, gpu string
		used, util  float64
	}{{"127.0.0.1:9001", "0", 10 << 30, 0.5}, {"127.0.0.1:9001", "1", 20 << 30, 0.25}, {"127.0.0.1:9002", "2", 30 << 30, 1}} {
		labels := prometheus.Labels{"engine": c.engine, "gpu": c.gpu}
		if got := testutil.ToFloat64(g.memoryUsed.With(labels)); got != c.used {
			t.Errorf("%v: memory used %v, want %v", labels, got, c.used)
		}
		if got := testutil.ToFloat64(g.utilization.With(labels)); got != c.util {
			t.Errorf("%v: utilization %v, want %v", labels, got, c.util)
		}
		if got := testutil.ToFloat64(g.memoryTotal.With(labels)); got != 80<<30 {
			t.Errorf("%v: memory total %v", labels, got)
		}
	}
	if n := testutil.CollectAndCount(g.memoryUsed, "caddy_mlc_gpu_memory_used_bytes"); n != 3 {
		t.Errorf("%d series, want 3 (the device no engine uses is not reported)", n)
	}
}
