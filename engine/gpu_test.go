package engine

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Without an NVIDIA driver Inventory reports ErrNoNVML; with one, it lists
// and logs the GPUs. Either way CheckGPUs refuses an absurd count.
func TestInventory(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	gpus, err := Inventory(zap.New(core))
	switch {
	case errors.Is(err, ErrNoNVML):
		t.Logf("no NVML here: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		if logs.FilterMessage("GPU").Len() != len(gpus) {
			t.Errorf("%d GPUs, %d logged", len(gpus), logs.Len())
		}
		for _, g := range gpus {
			t.Logf("GPU %d: %s, %d bytes", g.Index, g.Name, g.MemoryTotal)
		}
	}
	if err := CheckGPUs(1 << 20); !errors.Is(err, ErrNoNVML) && !errors.Is(err, ErrNotEnoughGPUs) {
		t.Errorf("CheckGPUs(1<<20) = %v", err)
	}
	if err := enoughGPUs(2, 3); !errors.Is(err, ErrNotEnoughGPUs) {
		t.Errorf("enoughGPUs(2, 3) = %v", err)
	}
	if err := enoughGPUs(3, 3); err != nil {
		t.Errorf("enoughGPUs(3, 3) = %v", err)
	}
}
