package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// The autoscaler's scale-down is a drain: the streams on the engine it
// takes away move, exactly, to the other when the grace (here 0) ends;
// then its process stops and it shows scaled down. Its scale-up starts
// it again, and it takes requests once ready.
func TestAutoscalerDownDrainsThenStops(t *testing.T) {
	c := startCore(t, 2, router.ModeWhole)
	hour := time.Hour // the autoscaler's own ticks decide nothing: the test drives it
	c.lc.Scale(c.fleet, &ScaleConfig{Min: 1, Max: 2, UpAfter: hour, DownAfter: hour, Cooldown: hour, KVHigh: 1})
	c.fleet.SetGrace(0)
	a := c.fleet.Scaler().(*autoscaler)
	const streams, maxTokens = 12, 600
	want := completiontest.References(t, c.engines[0], streams, maxTokens)
	movedBefore := migrated(t)
	downs := testutil.ToFloat64(scaleMetricsOf().decisions.WithLabelValues("tiny", "down", scaleIdle))

	finish := completiontest.ExactStreams(t, c.base, want, maxTokens)
	gone := c.fleet.Upstreams()[1]
	on := gone.InFlight()
	a.act(context.Background(), "tiny", 1, scaleDecision{-1, scaleIdle}, a.signals(time.Now(), c.lc.fleetRouters(c.fleet)))
	finish()
	if on == 0 {
		t.Fatal("no stream ran on the engine scaled down: the test tested nothing")
	}
	waitScaled(t, c, a, func() bool {
		return a.state(1) == ScaleScaledDown && c.fleet.State(1) == engine.StateStopped && c.fleet.Parked(1) && drainState(gone) == ""
	})
	moved := migrated(t) - movedBefore
	t.Logf("%d of %d streams on the engine scaled down; %v attempts moved", on, streams, moved)
	if moved == 0 {
		t.Error("no attempt moved")
	}
	if d := testutil.ToFloat64(scaleMetricsOf().decisions.WithLabelValues("tiny", "down", scaleIdle)) - downs; d != 1 {
		t.Errorf("scale-down decisions counted %v times", d)
	}
	if st := status(c.r); st.Scale == nil || st.Scale.Target != 1 || st.Scale.Last == nil || st.Scale.Last.Direction != "down" ||
		st.Engines[1].State != "stopped" || st.Engines[1].Scale != ScaleScaledDown {
		t.Errorf("status after the scale-down: %+v", st)
	}

	before := c.engineStatus(1).Requests
	a.act(context.Background(), "tiny", 1, scaleDecision{+1, scaleQueue}, a.signals(time.Now(), c.lc.fleetRouters(c.fleet)))
	waitScaled(t, c, a, func() bool { return gone.Ready() && a.state(1) == "" })
	for i := range 4 {
		got, err := completiontest.Text(c.base, completiontest.Greedy(completiontest.Tale(i), 8))
		if err != nil || !strings.HasPrefix(want[i], got) {
			t.Errorf("after the scale-up, request %d: %q, %v", i, got, err)
		}
	}
	if c.engineStatus(1).Requests == before {
		t.Error("the engine scaled up again got no request")
	}

	// An operator's drain is left alone: the drained engine is not the
	// one stopped, nor is the other, which alone serves.
	c.fleet.Drain(1, time.Hour)
	if i := a.choose(-1, c.r); i != -1 {
		t.Errorf("with engine 1 drained by an operator, the scale-down chose %d", i)
	}
	c.fleet.Undrain(1)
	if i := a.choose(-1, c.r); i != 1 {
		t.Errorf("the scale-down chose %d, want the last idle one, 1", i)
	}
}

// waitScaled waits, on the engines' changes, until the autoscaler's
// action is over and cond holds.
func waitScaled(t *testing.T, c *core, a *autoscaler, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		changed := c.live.NextChange()
		if !a.acting.Load() && cond() {
			return
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond): // acting ends without an engine change
		case <-deadline:
			t.Fatal("the autoscaler's action did not end")
		}
	}
}
