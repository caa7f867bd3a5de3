package caddymlc

import (
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// liveFleets returns the fleets of the live routers, each once.
func liveFleets() []*engine.Fleet {
	live.Lock()
	defer live.Unlock()
	seen := map[*liveFleet]bool{}
	var out []*engine.Fleet
	for r := range live.routers {
		if lf := r.handle.get(); lf != nil && !seen[lf] {
			seen[lf] = true
			out = append(out, lf.Fleet)
		}
	}
	return out
}

// liveInflight returns the in-flight count of every engine of every live
// router's fleet.
func liveInflight() []int64 {
	live.Lock()
	defer live.Unlock()
	var out []int64
	seen := map[*liveFleet]bool{}
	for r := range live.routers {
		lf := r.handle.get()
		if lf == nil || seen[lf] {
			continue
		}
		seen[lf] = true
		for _, u := range lf.upstreams {
			out = append(out, u.inflight.Load())
		}
	}
	return out
}

// runningFleets returns the fleets whose engines run or start, draining
// ones included.
func runningFleets() []*liveFleet {
	running.Lock()
	defer running.Unlock()
	var out []*liveFleet
	for lf := range running.fleets {
		out = append(out, lf)
	}
	return out
}

// waitDrained waits until every fleet of old that no live router uses
// any more has stopped its engines.
func waitDrained(t testing.TB, old []*liveFleet) {
	t.Helper()
	inUse := map[*liveFleet]bool{}
	live.Lock()
	for r := range live.routers {
		inUse[r.handle.get()] = true
	}
	live.Unlock()
	deadline := time.After(time.Minute)
	for _, lf := range old {
		if inUse[lf] {
			continue
		}
		select {
		case <-lf.done:
		case <-deadline:
			t.Fatalf("the engines of a replaced fleet did not stop")
		}
	}
}
