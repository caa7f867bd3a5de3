package caddymlc

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// poolFleets returns the fleets the mlc app's pool holds: those of the
// configs that run.
func poolFleets() []*fleet.Fleet {
	var out []*fleet.Fleet
	fleets.Range(func(_, v any) bool {
		out = append(out, v.(pooledFleet).Fleet)
		return true
	})
	return out
}

// liveFleets returns the engine fleets of the configs that run.
func liveFleets() []*engine.Fleet {
	var out []*engine.Fleet
	for _, lf := range poolFleets() {
		out = append(out, lf.Fleet)
	}
	return out
}

// liveInflight returns the in-flight count of every engine of every live
// router, as /mlc/engines shows it.
func liveInflight() []int64 {
	var out []int64
	for _, r := range liveNow().lifecycle.Statuses() {
		for _, e := range r.Engines {
			out = append(out, e.InFlight)
		}
	}
	return out
}

// runningFleets returns the fleets of the configs that run now: after a
// reload, waitDrained waits for those the new config does not keep.
func runningFleets() []*fleet.Fleet { return poolFleets() }

// waitDrained waits until every fleet of old that no config holds any
// more has stopped its engines.
func waitDrained(t testing.TB, old []*fleet.Fleet) {
	t.Helper()
	inUse := map[*fleet.Fleet]bool{}
	for _, lf := range poolFleets() {
		inUse[lf] = true
	}
	deadline := time.After(time.Minute)
	for _, lf := range old {
		if inUse[lf] {
			continue
		}
		select {
		case <-lf.Done():
		case <-deadline:
			t.Fatalf("the engines of a replaced fleet did not stop")
		}
	}
}

// metricsRegistry holds the router's metrics for tests to read, as
// Caddy's registry does for /metrics.
var metricsRegistry = func() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	if err := registerMetrics(reg); err != nil {
		panic(err)
	}
	if err := cluster.RegisterMetrics(reg); err != nil {
		panic(err)
	}
	return reg
}()

// metricValue returns the value of the series name{labels} (a counter,
// a gauge, or a histogram's count), 0 when it does not exist yet.
func metricValue(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return 0
}

// metricHistogram returns the histogram name{labels}, empty when it does
// not exist yet.
func metricHistogram(t testing.TB, name string, labels ...string) *dto.Histogram {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && m.Histogram != nil && hasLabels(m, labels) {
				return m.Histogram
			}
		}
	}
	return &dto.Histogram{}
}

// hasLabels reports whether m has every name=value pair of labels.
func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
