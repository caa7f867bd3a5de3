package router

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// gpuPollInterval is how often the GPUs of `engine mlc` fleets are read
// (NVML); memory and utilisation move slowly next to requests.
const gpuPollInterval = 10 * time.Second

// sampleGPUs reads the machine's GPUs; tests replace it with a fake (no
// GPU on the machines that run them).
var sampleGPUs = engine.SampleGPUs

// gpuMetrics are the GPU gauges, by engine and device.
type gpuMetrics struct {
	memoryUsed, memoryTotal, utilization *prometheus.GaugeVec
}

func newGPUMetrics(ns, sub string) gpuMetrics {
	labels := []string{"engine", "gpu"}
	return gpuMetrics{
		memoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_memory_used_bytes",
			Help: "GPU memory in use, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
		memoryTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_memory_total_bytes",
			Help: "GPU memory, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_utilization_ratio",
			Help: "Share of time a kernel ran on the GPU, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
	}
}

func (g gpuMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.memoryUsed, g.memoryTotal, g.utilization}
}

// pollGPUs reads, on an interval until ctx is done, the GPUs the fleet's
// spawned engines use (engine i has devices [start_i, start_i + gpus)),
// into the GPU gauges. Only `engine mlc` fleets have GPUs to read; a
// machine without NVML is said once and not asked again.
func (lf *LiveFleet) pollGPUs(ctx context.Context) {
	if !lf.spec.Kind.Driver().Traits().UsesGPUs || lf.spec.LocalGPUsNeeded() == 0 {
		return
	}
	goroutine.Go(lf.Log(), "GPU metrics", func() {
		t := time.NewTicker(gpuPollInterval)
		defer t.Stop()
		for {
			if err := lf.sampleGPUsOnce(); errors.Is(err, engine.ErrNoNVML) {
				lf.Log().Info("no GPU metrics: NVML is not available", zap.Error(err))
				return
			} else if err != nil {
				lf.Log().Warn("reading GPU metrics", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}, nil)
}

// sampleGPUsOnce reads the GPUs once into the gauges.
func (lf *LiveFleet) sampleGPUsOnce() error {
	samples, err := sampleGPUs()
	if err != nil {
		return err
	}
	byIndex := map[int]engine.GPUSample{}
	for _, s := range samples {
		byIndex[s.Index] = s
	}
	m := sharedMetrics().gpu
	starts := lf.spec.DeviceIDStarts()
	for i, ep := range lf.spec.Endpoints {
		if ep.External {
			continue
		}
		for dev := starts[i]; dev < starts[i+1]; dev++ {
			s, ok := byIndex[dev]
			if !ok {
				continue
			}
			labels := prometheus.Labels{"engine": ep.Addr(), "gpu": strconv.Itoa(dev)}
			m.memoryUsed.With(labels).Set(float64(s.MemoryUsed))
			m.memoryTotal.With(labels).Set(float64(s.MemoryTotal))
			m.utilization.With(labels).Set(s.Utilization)
		}
	}
	return nil
}
