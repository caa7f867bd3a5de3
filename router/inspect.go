package router

// What operators (the admin API) and tests may read of live routers and
// fleets, beyond Statuses.

// Live returns the routers that serve (made by New and not closed).
func Live() []*Router {
	live.Lock()
	defer live.Unlock()
	out := make([]*Router, 0, len(live.routers))
	for r := range live.routers {
		out = append(out, r)
	}
	return out
}

// LiveFleet returns the router's fleet, nil before its config started (or
// for a router with only discovered engines).
func (r *Router) Fleet() *LiveFleet { return r.handle.get() }

// Done is closed once the fleet's engines stopped (or never started).
func (lf *LiveFleet) Done() <-chan struct{} { return lf.done }

// Running returns the fleets whose engines run or start, draining ones
// included.
func Running() []*LiveFleet {
	running.Lock()
	defer running.Unlock()
	out := make([]*LiveFleet, 0, len(running.fleets))
	for lf := range running.fleets {
		out = append(out, lf)
	}
	return out
}

// InFlight is the calls the routers have in flight on the engine.
func (u *Upstream) InFlight() int64 { return u.inflight.Load() }

// Started is closed once the fleet's engines started, or failed to
// (Failed says which).
func (lf *LiveFleet) Started() <-chan struct{} { return lf.started }

// Failed returns the error of a start that failed, or nil.
func (lf *LiveFleet) Failed() error { return lf.failed() }
