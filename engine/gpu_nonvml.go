//go:build !(linux && cgo)

package engine

import (
	"fmt"
	"runtime"

	"go.uber.org/zap"
)

// buildLacksNVML: on Linux this build could have used NVML, with cgo
// (elsewhere there is no NVML to miss: MLC runs on Metal or Vulkan).
const buildLacksNVML = runtime.GOOS == "linux"

// Inventory cannot use NVML in this build: go-nvml needs cgo on Linux. It
// returns an error wrapping ErrNoNVML.
func Inventory(*zap.Logger) ([]GPU, error) {
	return nil, fmt.Errorf("%w: built without cgo or not on Linux", ErrNoNVML)
}

// SampleGPUs cannot use NVML in this build. It returns an error wrapping
// ErrNoNVML.
func SampleGPUs() ([]GPUSample, error) {
	return nil, fmt.Errorf("%w: built without cgo or not on Linux", ErrNoNVML)
}
