package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/completiontest"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// An operator's drain with a grace of 0 under 12 streams moves every
// stream on the engine to the other at once, exactly; the engine shows
// drained (status and caddy_mlc_engine_drain_state) once nothing runs on
// it, takes no new request, and undrained it takes requests again.
func TestDrainEngineMovesThenUndrains(t *testing.T) {
	c := startCore(t, 2, router.ModeWhole)
	const streams, maxTokens = 12, 600
	want := completiontest.References(t, c.engines[0], streams, maxTokens)
	movedBefore := migrated(t)
	drained := c.fleet.Upstreams()[1]
	gauge := scaleMetricsOf().drainState.WithLabelValues(drained.Addr())

	finish := completiontest.ExactStreams(t, c.base, want, maxTokens)
	on := drained.InFlight()
	if err := c.lc.DrainEngine(drained.Addr(), 0); err != nil {
		t.Fatal(err)
	}
	finish()
	if on == 0 {
		t.Fatal("no stream ran on the drained engine: the test tested nothing")
	}
	if migrated(t) == movedBefore {
		t.Error("no attempt was moved")
	}
	waitState(t, c, func() bool { return testutil.ToFloat64(gauge) == 2 })
	if st, err := c.lc.EngineDrainState(drained.Addr()); err != nil || st != DrainDrained || c.engineStatus(1).Drain != DrainDrained {
		t.Errorf("drain state %q (%v), status %q: want %q", st, err, c.engineStatus(1).Drain, DrainDrained)
	}
	before := c.engineStatus(1).Requests
	for i := range 4 {
		if got, err := completiontest.Text(c.base, completiontest.Greedy(completiontest.Tale(i), 8)); err != nil || !strings.HasPrefix(want[i], got) {
			t.Errorf("while drained, request %d: %q, %v", i, got, err)
		}
	}
	if after := c.engineStatus(1).Requests; after != before {
		t.Errorf("the drained engine got %d new requests", after-before)
	}

	if err := c.lc.UndrainEngine(drained.Addr()); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.lc.EngineDrainState(drained.Addr()); st != "" || testutil.ToFloat64(gauge) != 0 {
		t.Errorf("undrained: state %q, gauge %v", st, testutil.ToFloat64(gauge))
	}
	for i := range 4 {
		completiontest.Text(c.base, completiontest.Greedy(completiontest.Tale(i), 4))
	}
	if c.engineStatus(1).Requests == before {
		t.Error("the engine back in rotation got no request")
	}
	if err := c.lc.DrainEngine("127.0.0.1:1", 0); err == nil {
		t.Error("a drain of an address no router uses succeeded")
	}
}

// A drain with a grace lets the streams on the engine finish there: none
// moves, and the engine shows drained once they have ended.
func TestDrainGraceLetsStreamsFinish(t *testing.T) {
	c := startCore(t, 2, router.ModeWhole)
	const streams, maxTokens = 4, 300
	want := completiontest.References(t, c.engines[1], streams, maxTokens)
	movedBefore := migrated(t)
	finish := completiontest.ExactStreams(t, c.base, want, maxTokens)
	drained := c.fleet.Upstreams()[1]
	on := drained.InFlight()
	c.fleet.Drain(1, time.Minute)
	if err := c.fleet.WaitDrained(t.Context(), 1, 0); err != nil {
		t.Fatal(err)
	}
	finish()
	if on == 0 {
		t.Fatal("no stream ran on the drained engine: the test tested nothing")
	}
	if moved := migrated(t) - movedBefore; moved != 0 {
		t.Errorf("%v attempts moved within the grace", moved)
	}
	if st := c.engineStatus(1).Drain; st != DrainDrained {
		t.Errorf("status %q once its streams ended", st)
	}
	c.fleet.Undrain(1)
}

// waitState waits, on the engines' changes and a short poll (a gauge
// set by a goroutine notifies nothing), until cond holds.
func waitState(t *testing.T, c *core, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-c.live.NextChange():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("timed out")
		}
	}
}
