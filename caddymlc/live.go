package caddymlc

import (
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// lives holds what outlives a reload (a process): the routers'
// router.Live and the engines' fleet.Lifecycle (the old config's routers
// drain beside the new one's, the operator's API sees both, and a
// rolling restart or a drain goes on across it), the app that started
// last, and whether Caddy exits. Every mlc app holds it while it runs;
// the last one's Cleanup lets it go.
var lives = caddy.NewUsagePool()

const liveKey = "mlc-live"

// process is what lives holds.
type process struct {
	*router.Live
	lifecycle *fleet.Lifecycle
	// current is the mlc app of the config that started last: the one
	// whose routers take over the requests of the routers of a stopping
	// config.
	current atomic.Pointer[App]
	// shuttingDown is set when the mlc app stops because Caddy exits
	// (see exiting).
	shuttingDown atomic.Bool
}

// newProcess returns an empty Live and its lifecycle.
func newProcess() *process {
	lv := router.NewLive()
	return &process{Live: lv, lifecycle: fleet.New(lv)}
}

// Destruct has nothing to release: the routers close with their config.
func (*process) Destruct() error { return nil }

// acquireProcess returns the process's state, made if no app holds it;
// each call is to be matched by a releaseProcess.
func acquireProcess() *process {
	val, _, _ := lives.LoadOrNew(liveKey, func() (caddy.Destructor, error) { return newProcess(), nil })
	return val.(*process)
}

// releaseProcess lets go of an acquireProcess's hold.
func releaseProcess() { _, _ = lives.Delete(liveKey) }

// liveNow is the process state the running apps hold, for the admin
// API; an empty one when no mlc app runs.
func liveNow() *process {
	var p *process
	lives.Range(func(_, v any) bool {
		p = v.(*process)
		return false
	})
	if p == nil {
		return newProcess()
	}
	return p
}
