package engine

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// ErrNoNVML is returned by [Inventory] and [CheckGPUs] when NVML cannot be
// used: no NVIDIA driver on this machine, or a binary built without cgo
// (go-nvml needs it). Callers log it once and carry on without a GPU check.
var ErrNoNVML = errors.New("NVML is not available")

// ErrNotEnoughGPUs is wrapped by [CheckGPUs] when the machine has fewer
// GPUs than the fleet needs.
var ErrNotEnoughGPUs = errors.New("not enough GPUs")

// GPU is one NVIDIA GPU of this machine.
type GPU struct {
	// Index is the NVML (and, by default, CUDA) device index.
	Index int
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// UUID is the GPU's unique id.
	UUID string
	// MemoryTotal and MemoryFree are in bytes.
	MemoryTotal, MemoryFree uint64
}

// CheckGPUs refuses (wrapping ErrNotEnoughGPUs) when this machine has
// fewer than needed GPUs. Without NVML it returns an error wrapping
// ErrNoNVML, which callers log once and ignore.
func CheckGPUs(needed int) error {
	gpus, err := Inventory(zap.NewNop())
	if err != nil {
		return err
	}
	return enoughGPUs(len(gpus), needed)
}

func enoughGPUs(have, needed int) error {
	if have < needed {
		return fmt.Errorf("%w: the engines need %d GPUs, this machine has %d", ErrNotEnoughGPUs, needed, have)
	}
	return nil
}
