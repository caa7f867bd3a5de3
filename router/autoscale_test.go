package router

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// The autoscaler's scale-down is a drain: the streams on the engine it
// takes away move, exactly, to the other when the grace (here 0) ends;
// then its process stops and it shows scaled down. Its scale-up starts
// it again, and it takes requests once ready.
func TestAutoscalerDownDrainsThenStops(t *testing.T) {
	c := startCore(t, 2, Config{Mode: ModeWhole}, nil)
	hour := time.Hour // the autoscaler's own ticks decide nothing: the test drives it
	c.fleet.SetScale(&ScaleConfig{Min: 1, Max: 2, UpAfter: hour, DownAfter: hour, Cooldown: hour, KVHigh: 1})
	c.fleet.SetGrace(0)
	a := c.fleet.scaler.Load()
	const streams, maxTokens = 12, 600
	want := references(c, c.engines[0], streams, maxTokens)
	migrated := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate))
	downs := testutil.ToFloat64(scaleMetricsOf().decisions.WithLabelValues("tiny", "down", scaleIdle))

	finish := exactDrainStreams(t, c, want, maxTokens)
	gone := c.fleet.upstreams[1]
	on := gone.inflight.Load()
	a.act(context.Background(), "tiny", 1, scaleDecision{-1, scaleIdle}, a.signals(time.Now(), c.fleet.routers()))
	finish()
	if on == 0 {
		t.Fatal("no stream ran on the engine scaled down: the test tested nothing")
	}
	waitScaled(t, a, func() bool {
		return a.state(1) == ScaleScaledDown && c.fleet.State(1) == engine.StateStopped && c.fleet.Parked(1) && gone.drainStatus() == ""
	})
	moved := testutil.ToFloat64(sharedMetrics().retries.WithLabelValues(causeMigrate)) - migrated
	t.Logf("%d of %d streams on the engine scaled down; %v attempts moved", on, streams, moved)
	if moved == 0 {
		t.Error("no attempt moved")
	}
	if d := testutil.ToFloat64(scaleMetricsOf().decisions.WithLabelValues("tiny", "down", scaleIdle)) - downs; d != 1 {
		t.Errorf("scale-down decisions counted %v times", d)
	}
	if st := c.r.Status(); st.Scale == nil || st.Scale.Target != 1 || st.Scale.Last == nil || st.Scale.Last.Direction != "down" ||
		st.Engines[1].State != "stopped" || st.Engines[1].Scale != ScaleScaledDown {
		t.Errorf("status after the scale-down: %+v", st)
	}

	before := gone.requests.Load()
	a.act(context.Background(), "tiny", 1, scaleDecision{+1, scaleQueue}, a.signals(time.Now(), c.fleet.routers()))
	waitScaled(t, a, func() bool { ready, _ := gone.status(); return ready && a.state(1) == "" })
	for i := range 4 {
		if got := c.complete(c.base, greedy(drainPrompt(i), 8)); !strings.HasPrefix(want[i], got) {
			t.Errorf("after the scale-up, request %d: %q", i, got)
		}
	}
	if gone.requests.Load() == before {
		t.Error("the engine scaled up again got no request")
	}

	// An operator's drain is left alone: the drained engine is not the
	// one stopped, nor is the other, which alone serves.
	gone.Drain(time.Hour)
	if i := a.choose(-1, c.r); i != -1 {
		t.Errorf("with engine 1 drained by an operator, the scale-down chose %d", i)
	}
	gone.Undrain()
	if i := a.choose(-1, c.r); i != 1 {
		t.Errorf("the scale-down chose %d, want the last idle one, 1", i)
	}
}

// waitScaled waits, on the engines' changes, until the autoscaler's
// action is over and cond holds.
func waitScaled(t *testing.T, a *autoscaler, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		changed := a.lf.live.changes.wait()
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
