package caddymlc

import "sync"

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
