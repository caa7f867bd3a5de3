package fleet

import (
	"slices"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/engine"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// Lifecycle is the engines' lifecycle of a process's routers: an
// operator's drain of an engine, the rolling restarts of a model's
// engines, and the fleets' autoscalers. The mlc app owns one beside the
// routers' router.Live and keeps it across reloads, so that a rolling
// restart goes on across one.
type Lifecycle struct {
	routers *router.Live
	// running are the fleets whose engines run, which a new fleet's
	// launch waits for where they hold its ports (a reload's).
	running *engine.Running

	mu    sync.Mutex
	rolls map[string]*RollStatus // the last rolling restart of each model
}

// New returns the lifecycle of the routers of live.
func New(live *router.Live) *Lifecycle {
	return &Lifecycle{routers: live, running: engine.NewRunning(), rolls: map[string]*RollStatus{}}
}

// fleetRouters are the live routers whose engines are lf's, by model.
func (lc *Lifecycle) fleetRouters(lf *Fleet) []*router.Router {
	return slices.DeleteFunc(lc.routers.Routers(), func(r *router.Router) bool { return r.Pool() != lf.Pool() })
}

// closeIdleTo drops the routers' idle connections, after the engine u
// restarted: they went to its old process.
func (lc *Lifecycle) closeIdleTo(u *router.Upstream) {
	for _, r := range lc.routers.Routers() {
		if slices.Contains(r.Engines(), u) {
			r.CloseIdle()
		}
	}
}
