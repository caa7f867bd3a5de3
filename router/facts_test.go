package router

import (
	"testing"
	"time"
)

// A target a request sets is a positive number of milliseconds up to an
// hour; anything else is none.
func TestParseTargetMs(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"120": 120 * time.Millisecond, " 80.5 ": 80500 * time.Microsecond, "3600000": time.Hour,
		"3600001": 0, "": 0, "soon": 0, "-3": 0, "0": 0, "NaN": 0, "+Inf": 0,
	} {
		if got := ParseTargetMs(v); got != want {
			t.Errorf("ParseTargetMs(%q) = %v, want %v", v, got, want)
		}
	}
}

// A request's own targets stand; each one it lacks comes from the
// defaults, alone.
func TestTargetsOr(t *testing.T) {
	own := Targets{TTFT: time.Second}
	got := own.Or(Targets{TTFT: 5 * time.Second, TPOT: 20 * time.Millisecond}).Or(Targets{TPOT: time.Minute})
	if want := (Targets{TTFT: time.Second, TPOT: 20 * time.Millisecond}); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	if got := (Targets{}).Or(Targets{}); got.Set() {
		t.Errorf("no targets and no defaults: %+v", got)
	}
}
