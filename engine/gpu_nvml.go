//go:build linux && cgo

package engine

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// Inventory lists this machine's GPUs through NVML and logs each one. It
// returns an error wrapping ErrNoNVML when the NVML library is missing.
// go-nvml loads libnvidia-ml with dlopen, so this builds and runs without
// the driver.
func Inventory(logger *zap.Logger) ([]GPU, error) {
	n, err := openNVML()
	if err != nil {
		return nil, err
	}
	defer nvml.Shutdown()
	gpus := make([]GPU, 0, n)
	for i := range n {
		gpu, err := deviceInfo(i)
		if err != nil {
			return nil, err
		}
		logger.Info("GPU", zap.Int("index", i), zap.String("name", gpu.Name),
			zap.String("memory_total", humanize.IBytes(gpu.MemoryTotal)),
			zap.String("memory_free", humanize.IBytes(gpu.MemoryFree)), zap.String("uuid", gpu.UUID))
		gpus = append(gpus, gpu)
	}
	return gpus, nil
}

// deviceInfo reads GPU i. NVML must be initialised.
func deviceInfo(i int) (GPU, error) {
	dev, ret := nvml.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d: %w", i, ret)
	}
	gpu := GPU{Index: i}
	if gpu.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d name: %w", i, ret)
	}
	gpu.UUID, _ = dev.GetUUID() // informational only
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d memory: %w", i, ret)
	}
	gpu.MemoryTotal, gpu.MemoryFree = mem.Total, mem.Free
	return gpu, nil
}

// SampleGPUs reads every GPU's memory use and utilisation through NVML. It
// returns an error wrapping ErrNoNVML when the NVML library is missing.
func SampleGPUs() ([]GPUSample, error) {
	n, err := openNVML()
	if err != nil {
		return nil, err
	}
	defer nvml.Shutdown()
	out := make([]GPUSample, 0, n)
	for i := range n {
		dev, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %w", i, ret)
		}
		s := GPUSample{Index: i}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemoryUsed, s.MemoryTotal = mem.Used, mem.Total
		}
		if util, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			s.Utilization = float64(util.Gpu) / 100
		}
		out = append(out, s)
	}
	return out, nil
}

// openNVML initialises NVML and returns the number of GPUs; the caller
// shuts NVML down. Without the library it returns an error wrapping
// ErrNoNVML.
func openNVML() (int, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return 0, fmt.Errorf("%w: %v", ErrNoNVML, ret)
		}
		return 0, fmt.Errorf("nvml init: %w", ret)
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		nvml.Shutdown()
		return 0, fmt.Errorf("nvml device count: %w", ret)
	}
	return n, nil
}
