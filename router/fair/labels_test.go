package fair

import (
	"fmt"
	"slices"
	"testing"
)

func TestLabelsTopTenants(t *testing.T) {
	var evicted []string
	l := NewLabels(3, func(name string) { evicted = append(evicted, name) })
	named := map[string]bool{}
	check := func(tenant, label string) {
		t.Helper()
		if label != tenant && label != Other {
			t.Fatalf("label %q for tenant %q", label, tenant)
		}
		if label != Other {
			named[label] = true
		}
		if n := len(l.Named()); n > 3 {
			t.Fatalf("%d tenants named, want at most 3", n)
		}
	}
	// One-off tenants take the free names first.
	for i := range 100 {
		tenant := fmt.Sprintf("once%d", i)
		check(tenant, l.Label(tenant, 1))
	}
	// Then three heavy tenants among a stream of one-off ones.
	for i := range 3000 {
		heavy := fmt.Sprintf("heavy%d", i%3)
		check(heavy, l.Label(heavy, 1))
		once := fmt.Sprintf("later%d", i)
		if got := l.Label(once, 1); got != Other && i > 300 {
			t.Fatalf("one-off tenant %s named once the heavy ones were", once)
		}
	}
	if got := l.Named(); !slices.Equal(got, []string{"heavy0", "heavy1", "heavy2"}) {
		t.Fatalf("named %v, want the heavy tenants", got)
	}
	for _, h := range []string{"heavy0", "heavy1", "heavy2"} {
		if got := l.Label(h, 1); got != h {
			t.Fatalf("%s labelled %q", h, got)
		}
	}
	// Every name handed out is named now or was reported evicted: the
	// series of metrics stay bounded.
	for name := range named {
		if !slices.Contains(l.Named(), name) && !slices.Contains(evicted, name) {
			t.Fatalf("%s was a label, is not, and was never reported evicted", name)
		}
	}
	// The first three one-off tenants, then the heavy ones: no churn of
	// one-off names while names were free.
	if len(named) != 6 || len(evicted) != 3 {
		t.Fatalf("%d names handed out, %d evicted (%v), want 6 and 3", len(named), len(evicted), evicted)
	}
}

// Two tenants of about the same traffic do not take each other's name in
// turn.
func TestLabelsNoFlapping(t *testing.T) {
	evictions := 0
	l := NewLabels(1, func(string) { evictions++ })
	for i := range 10000 {
		l.Label([]string{"a", "b"}[i%2], int64(100+i%7))
	}
	if evictions > 0 {
		t.Fatalf("%d evictions between two tenants of equal traffic", evictions)
	}
	if l := NewLabels(0, nil); l.Label("a", 1) != Other {
		t.Fatal("a tenant named with no names allowed")
	}
}

// Counts follow recent traffic: a tenant that stopped gives its name up
// to one that goes on, however much it sent before.
func TestLabelsDecay(t *testing.T) {
	l := NewLabels(1, nil)
	for range 1000 {
		l.Label("old", 1_000_000)
	}
	for i := range 600_000 {
		if l.Label("new", 1) == "new" {
			if i < 100_000 {
				t.Fatalf("new named after %d calls, before old's traffic decayed", i)
			}
			return
		}
	}
	t.Fatal("a tenant that stopped kept its name")
}
