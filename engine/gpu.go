package engine

import (
	"errors"
	"fmt"
)

// ErrNoNVML is returned by [Inventory] when NVML cannot be used: no NVIDIA
// driver on this machine, or a binary built without cgo (go-nvml needs
// it). Callers log it once and carry on without a GPU check.
var ErrNoNVML = errors.New("NVML is not available")

// ErrBuiltWithoutCgo is the error of a spec whose engines run on this
// machine's GPUs in a Linux binary built without cgo: go-nvml loads NVML
// through cgo, so such a binary can neither check the GPUs before the
// engines start nor watch them after.
var ErrBuiltWithoutCgo = errors.New("this binary was built without cgo (CGO_ENABLED=0), so it cannot load NVML to check and watch the GPUs; " +
	"rebuild it with CGO_ENABLED=1 (xcaddy's default is cgo off: CGO_ENABLED=1 xcaddy build ..., see the README)")

// CheckBuild refuses a spec that spawns engines on this machine's GPUs
// (engine mlc, gpus of at least 1 on an endpoint that is not external)
// when this binary cannot read them: a Linux build without cgo.
func (s Spec) CheckBuild() error { return s.checkBuild(buildLacksNVML) }

func (s Spec) checkBuild(lacksNVML bool) error {
	if !lacksNVML || !s.Kind.Driver().Traits().UsesGPUs || s.LocalGPUsNeeded() == 0 {
		return nil
	}
	return fmt.Errorf("%w: engine %s on %d GPUs", ErrBuiltWithoutCgo, s.Kind, s.LocalGPUsNeeded())
}

// ErrNotEnoughGPUs is wrapped by the error of a fleet's Start when this
// machine has fewer GPUs than its MLC engines need.
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

func enoughGPUs(have, needed int) error {
	if have < needed {
		return fmt.Errorf("%w: the engines need %d GPUs, this machine has %d", ErrNotEnoughGPUs, needed, have)
	}
	return nil
}

// GPUSample is one GPU's memory use and utilisation at a moment.
type GPUSample struct {
	// Index is the NVML (and, by default, CUDA) device index.
	Index int
	// MemoryUsed and MemoryTotal are in bytes.
	MemoryUsed, MemoryTotal uint64
	// Utilization is the share of the last sample period during which a
	// kernel ran, in [0, 1].
	Utilization float64
}
