package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The planner adds an engine only after pressure lasted up_after, takes
// one away only after idleness lasted down_after, waits the cool-down
// after each change, and goes back inside min..max, or wakes a sleeping
// model, at once.
func TestScalePlanner(t *testing.T) {
	cfg := ScaleConfig{Min: 1, Max: 3, UpAfter: 2 * time.Second, DownAfter: 10 * time.Second, Cooldown: 5 * time.Second, KVHigh: 0.9}
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	busy := scaleSignals{size: 1, waiting: 4, inFlight: 8, batch: 8}
	steps := []struct {
		at     float64
		s      scaleSignals
		want   int
		reason string
	}{
		{-10, scaleSignals{size: 0}, +1, scaleBelowMin}, // its cool-down ends at -5
		{0, busy, 0, ""}, // pressure begins
		{1, busy, 0, ""}, // not for up_after yet
		{1.5, scaleSignals{size: 1, inFlight: 8, batch: 8}, 0, ""}, // a break: it starts over
		{2, busy, 0, ""},
		{3.9, busy, 0, ""},
		{4, busy, +1, scaleQueue}, // 2 s without a break
		{4.5, scaleSignals{size: 2, inFlight: 16, batch: 8, kvUsed: 0.95}, 0, ""}, // cool-down
		{8.9, scaleSignals{size: 2, inFlight: 16, batch: 8, kvUsed: 0.95}, 0, ""}, // cooling down till 9
		{9, scaleSignals{size: 2, inFlight: 16, batch: 8, blocked: true}, +1, scaleKV},
		{10, scaleSignals{size: 3, waiting: 9, batch: 8}, 0, ""},  // at max
		{20, scaleSignals{size: 3, inFlight: 9, batch: 8}, 0, ""}, // 9 > 2*8/2: not idle
		{21, scaleSignals{size: 3, inFlight: 8, batch: 8}, 0, ""}, // idle from now
		{30.9, scaleSignals{size: 3, inFlight: 8, batch: 8}, 0, ""},
		{31, scaleSignals{size: 3, inFlight: 8, batch: 8}, -1, scaleIdle},
		{32, scaleSignals{size: 2}, 0, ""}, // cooling down; idle since 32
		{41, scaleSignals{size: 2}, 0, ""},
		{42, scaleSignals{size: 2}, -1, scaleIdle},
		{60, scaleSignals{size: 1}, 0, ""}, // at min
		{61, scaleSignals{size: 4}, -1, scaleAboveMax},
	}
	p := &scalePlanner{cfg: cfg}
	for i, st := range steps {
		d := p.decide(at(st.at), st.s)
		if d.delta != st.want || d.reason != st.reason {
			t.Fatalf("step %d (t=%v, %+v): %+v, want %+d %q", i, st.at, st.s, d, st.want, st.reason)
		}
		if d.delta != 0 {
			p.changed(at(st.at))
		}
	}

	sleepy := &scalePlanner{cfg: ScaleConfig{Min: 0, Max: 2, UpAfter: time.Hour, DownAfter: 3 * time.Second, Cooldown: time.Hour}.WithDefaults()}
	if d := sleepy.decide(t0, scaleSignals{size: 0, waiting: 1}); d.delta != 1 || d.reason != scaleColdStart {
		t.Errorf("a request for a sleeping model: %+v", d)
	}
	sleepy.changed(t0)
	sleepy.cfg.Cooldown = time.Second
	for _, s := range []float64{1, 3.9} {
		if d := sleepy.decide(at(s), scaleSignals{size: 1}); d.delta != 0 {
			t.Fatalf("t=%v: %+v", s, d)
		}
	}
	if d := sleepy.decide(at(4), scaleSignals{size: 1}); d.delta != -1 || d.reason != scaleIdle {
		t.Errorf("an idle model: %+v", d)
	}
	if d := sleepy.decide(at(4), scaleSignals{size: 1, inFlight: 1}); d.delta != 0 {
		t.Errorf("the last engine with a request on it: %+v", d)
	}
}

func TestScaleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    ScaleConfig
		pool int
		ok   bool
	}{
		{ScaleConfig{Min: 1, Max: 3}, 3, true},
		{ScaleConfig{Min: 0, Max: 1}, 3, true},
		{ScaleConfig{Min: 2, Max: 1}, 3, false},
		{ScaleConfig{Min: 1, Max: 4}, 3, false},
		{ScaleConfig{Min: 0, Max: 0}, 3, false},
		{ScaleConfig{Min: 1, Max: 2, KVHigh: 1.5}, 3, false},
	} {
		if err := tc.c.Validate(tc.pool); (err == nil) != tc.ok {
			t.Errorf("%+v of %d: %v", tc.c, tc.pool, err)
		}
	}
}

// The first generating engine starts first: a decode engine in disagg.
func TestScaleOrder(t *testing.T) {
	eps := []engine.Endpoint{{Port: 1}, {Port: 2}, {Port: 3, External: true}, {Port: 4}}
	if got := ScaleOrder(router.ModeDisagg, eps); !slices.Equal(got, []int{1, 0, 3}) {
		t.Errorf("disagg: %v", got)
	}
	if got := ScaleOrder(router.ModeWhole, eps); !slices.Equal(got, []int{0, 1, 3}) {
		t.Errorf("whole: %v", got)
	}
}
