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
		// A build with NVML on a machine without a driver says so, not
		// that the binary lacks cgo.
		if !buildLacksNVML && !strings.Contains(err.Error(), "no NVIDIA driver") {
			t.Fatalf("error %q does not say that there is no NVIDIA driver", err)
		}
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

// A Linux build without cgo refuses engines on this machine's GPUs, and
// only those; a build with NVML refuses nothing.
func TestCheckBuild(t *testing.T) {
	eps := func(external bool) []Endpoint {
		return []Endpoint{{Host: "127.0.0.1", Port: 1, GPUs: 2, External: external}, {Host: "127.0.0.1", Port: 2, GPUs: 1, External: external}}
	}
	cases := []struct {
		name   string
		spec   Spec
		refuse bool
	}{
		{"mlc on GPUs", Spec{Kind: KindMLC, Endpoints: eps(false)}, true},
		{"mlc, external engines", Spec{Kind: KindMLC, Endpoints: eps(true)}, false},
		{"builtin", Spec{Kind: KindBuiltin, Endpoints: eps(false)}, false},
		{"command", Spec{Kind: KindCommand, Endpoints: eps(false)}, false},
	}
	for _, c := range cases {
		err := c.spec.checkBuild(true)
		if c.refuse != (err != nil) || (err != nil && (!errors.Is(err, ErrBuiltWithoutCgo) || !strings.Contains(err.Error(), "CGO_ENABLED=1") || !strings.Contains(err.Error(), "3 GPUs"))) {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := c.spec.checkBuild(false); err != nil {
			t.Errorf("%s, with NVML: %v", c.name, err)
		}
	}
}
