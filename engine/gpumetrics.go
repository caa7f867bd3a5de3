package engine

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// gpuPollInterval is how often the GPUs of `engine mlc` fleets are read
// (NVML); memory and utilisation move slowly next to requests.
const gpuPollInterval = 10 * time.Second

// gpuMetrics are the GPU gauges, by engine and device, shared by every
// fleet of the process.
type gpuMetrics struct {
	memoryUsed, memoryTotal, utilization *prometheus.GaugeVec
}

var sharedGPUMetrics = sync.OnceValue(func() gpuMetrics {
	const ns, sub = "caddy", "mlc"
	labels := []string{"engine", "gpu"}
	return gpuMetrics{
		memoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_memory_used_bytes",
			Help: "GPU memory in use, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
		memoryTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_memory_total_bytes",
			Help: "GPU memory, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "gpu_utilization_ratio",
			Help: "Share of time a kernel ran on the GPU, per engine of an `engine mlc` fleet and device (NVML)."}, labels),
	}
})

// RegisterMetrics adds the engines' metrics (their GPUs) to a registry
// (Caddy's), once per registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	g := sharedGPUMetrics()
	for _, c := range []prometheus.Collector{g.memoryUsed, g.memoryTotal, g.utilization} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return err
			}
		}
	}
	return nil
}

// PollGPUs reads, on an interval until ctx is done, the GPUs the fleet's
// spawned engines use (engine i has devices [start_i, start_i + gpus)),
// into the GPU gauges. Only `engine mlc` fleets have GPUs to read; a
// machine without NVML is said once and not asked again.
func (f *Fleet) PollGPUs(ctx context.Context) {
	if !f.spec.Kind.Driver().Traits().UsesGPUs || f.spec.LocalGPUsNeeded() == 0 {
		return
	}
	goroutine.Go(f.logger(), "GPU metrics", func() {
		t := time.NewTicker(gpuPollInterval)
		defer t.Stop()
		for {
			if err := f.sampleGPUsOnce(); errors.Is(err, ErrNoNVML) {
				f.logger().Info("no GPU metrics: NVML is not available", zap.Error(err))
				return
			} else if err != nil {
				f.logger().Warn("reading GPU metrics", zap.Error(err))
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
func (f *Fleet) sampleGPUsOnce() error {
	sample := f.opts.SampleGPUs
	if sample == nil {
		sample = SampleGPUs
	}
	samples, err := sample()
	if err != nil {
		return err
	}
	byIndex := map[int]GPUSample{}
	for _, s := range samples {
		byIndex[s.Index] = s
	}
	m := sharedGPUMetrics()
	starts := f.spec.DeviceIDStarts()
	for i, ep := range f.spec.Endpoints {
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
