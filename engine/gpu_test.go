package engine

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Without an NVIDIA driver Inventory reports ErrNoNVML; with one, it lists
// and logs the GPUs, with their memory in human units.
func TestInventory(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	gpus, err := Inventory(zap.New(core))
	switch {
	case errors.Is(err, ErrNoNVML):
		t.Logf("no NVML here: %v", err)
	case err != nil:
		t.Fatal(err)
	default:
		logged := logs.FilterMessage("GPU").All()
		if len(logged) != len(gpus) {
			t.Fatalf("%d GPUs, %d logged", len(gpus), logs.Len())
		}
		for i, g := range gpus {
			m := logged[i].ContextMap()
			t.Logf("GPU %d: %s, %d bytes: logged %v", g.Index, g.Name, g.MemoryTotal, m)
			if total, _ := m["memory_total"].(string); !strings.HasSuffix(total, "iB") || m["name"] != g.Name {
				t.Errorf("GPU %d logged as %v", i, m)
			}
		}
	}
	if err := enoughGPUs(2, 3); !errors.Is(err, ErrNotEnoughGPUs) {
		t.Errorf("enoughGPUs(2, 3) = %v", err)
	}
	if err := enoughGPUs(3, 3); err != nil {
		t.Errorf("enoughGPUs(3, 3) = %v", err)
	}
}
