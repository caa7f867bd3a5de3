//go:build linux && cgo

package engine

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// buildLacksNVML: this build loads NVML.
const buildLacksNVML = false

// Inventory lists this machine's GPUs through NVML and logs each one. It
// returns an error wrapping ErrNoNVML when the NVML library is missing.
// go-nvml loads libnvidia-ml with dlopen, so this builds and runs without
// the driver.
func Inventory(logger *zap.Logger) ([]GPU, error) {
	return eachDevice(func(i int, dev nvml.Device) (GPU, error) {
		gpu, err := deviceInfo(i, dev)
		if err == nil {
			logger.Info("GPU", zap.Int("index", i), zap.String("name", gpu.Name),
				zap.String("memory_total", humanize.IBytes(gpu.MemoryTotal)),
				zap.String("memory_free", humanize.IBytes(gpu.MemoryFree)), zap.String("uuid", gpu.UUID))
		}
		return gpu, err
	})
}

// deviceInfo reads GPU i.
func deviceInfo(i int, dev nvml.Device) (GPU, error) {
	gpu := GPU{Index: i}
	var ret nvml.Return
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
	return eachDevice(func(i int, dev nvml.Device) (GPUSample, error) {
		s := GPUSample{Index: i}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemoryUsed, s.MemoryTotal = mem.Used, mem.Total
		}
		if util, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			s.Utilization = float64(util.Gpu) / 100
		}
		return s, nil
	})
}

// eachDevice opens NVML, reads every GPU with read, in index order, and
// closes NVML. Without the library it returns an error wrapping
// ErrNoNVML.
func eachDevice[T any](read func(i int, dev nvml.Device) (T, error)) ([]T, error) {
	n, err := openNVML()
	if err != nil {
		return nil, err
	}
	defer nvml.Shutdown()
	out := make([]T, 0, n)
	for i := range n {
		dev, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %w", i, ret)
		}
		v, err := read(i, dev)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// openNVML initialises NVML and returns the number of GPUs; the caller
// shuts NVML down. Without the library it returns an error wrapping
// ErrNoNVML.
func openNVML() (int, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return 0, fmt.Errorf("%w: no NVIDIA driver on this machine (%v)", ErrNoNVML, ret)
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
