package descriptors

import "testing"

// The descriptor alarm warns once when the count crosses 90% of the
// limit, and again only after it fell below 80%.
func TestAlarm(t *testing.T) {
	var a alarmState
	for i, c := range []struct {
		open, limit int
		warn        bool
	}{
		{500, 1024, false}, {922, 1024, true}, {1024, 1024, false}, {850, 1024, false},
		{930, 1024, false}, {800, 1024, false}, {1000, 1024, true}, {10, 0, false},
	} {
		if got := a.observe(c.open, c.limit); got != c.warn {
			t.Errorf("step %d (%d of %d): warn %v, want %v", i, c.open, c.limit, got, c.warn)
		}
	}
}
