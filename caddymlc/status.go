package caddymlc

import (
	"sync"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// live holds the provisioned routers of the running configs, for the
// status API and tests.
var live struct {
	sync.Mutex
	routers map[*Router]struct{}
}

func addLive(r *Router) {
	live.Lock()
	defer live.Unlock()
	if live.routers == nil {
		live.routers = map[*Router]struct{}{}
	}
	live.routers[r] = struct{}{}
}

func removeLive(r *Router) {
	live.Lock()
	defer live.Unlock()
	delete(live.routers, r)
}

// liveInflight returns the in-flight counts of every engine of every live
// router.
func liveInflight() []int64 {
	live.Lock()
	defer live.Unlock()
	var out []int64
	for r := range live.routers {
		out = append(out, r.bal.inflight()...)
	}
	return out
}

// liveFleets returns the running fleets of the live routers.
func liveFleets() []*engine.Fleet {
	live.Lock()
	defer live.Unlock()
	var out []*engine.Fleet
	for r := range live.routers {
		if f := r.fleet.get(); f != nil {
			out = append(out, f)
		}
	}
	return out
}
