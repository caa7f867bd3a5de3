package caddymlc

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// lives holds the routers' router.Live and the engines' fleet.Lifecycle,
// which outlive a reload: the old config's routers drain beside the new
// one's, the operator's API sees both, and a rolling restart or a drain
// goes on across it. Every mlc app holds them while it runs; the last
// one's Cleanup lets them go.
var lives = caddy.NewUsagePool()

const liveKey = "mlc-live"

// pooledLive is what lives holds: the routers' Live and the lifecycle of
// their engines.
type pooledLive struct {
	*router.Live
	lifecycle *fleet.Lifecycle
}

// newLive returns an empty Live and its lifecycle.
func newLive() pooledLive {
	lv := router.NewLive()
	return pooledLive{Live: lv, lifecycle: fleet.New(lv)}
}

// Destruct has nothing to release: the routers close with their config.
func (pooledLive) Destruct() error { return nil }

// acquireLive returns the process's Live, made if no app holds it; each
// call is to be matched by a releaseLive.
func acquireLive() pooledLive {
	val, _, _ := lives.LoadOrNew(liveKey, func() (caddy.Destructor, error) { return newLive(), nil })
	return val.(pooledLive)
}

// releaseLive lets go of an acquireLive's hold.
func releaseLive() { _, _ = lives.Delete(liveKey) }

// liveNow is the Live the running apps hold, for the admin API; an empty
// one when no mlc app runs.
func liveNow() pooledLive {
	var l pooledLive
	lives.Range(func(_, v any) bool {
		l = v.(pooledLive)
		return false
	})
	if l.Live == nil {
		return newLive()
	}
	return l
}
