package caddymlc

import (
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddyserver/caddy/v2"
)

// lives holds the routers' router.Live, which outlives a reload: the old
// config's routers drain beside the new one's, the operator's API sees
// both, and a rolling restart or a drain goes on across it. Every mlc app
// holds it while it runs; the last one's Cleanup lets it go.
var lives = caddy.NewUsagePool()

const liveKey = "mlc-live"

// pooledLive is the Live in lives.
type pooledLive struct{ *router.Live }

// Destruct has nothing to release: the routers close with their config.
func (pooledLive) Destruct() error { return nil }

// acquireLive returns the process's Live, made if no app holds it; each
// call is to be matched by a releaseLive.
func acquireLive() *router.Live {
	val, _, _ := lives.LoadOrNew(liveKey, func() (caddy.Destructor, error) { return pooledLive{router.NewLive()}, nil })
	return val.(pooledLive).Live
}

// releaseLive lets go of an acquireLive's hold.
func releaseLive() { _, _ = lives.Delete(liveKey) }

// liveNow is the Live the running apps hold, for the admin API; an empty
// one when no mlc app runs.
func liveNow() *router.Live {
	var l *router.Live
	lives.Range(func(_, v any) bool {
		l = v.(pooledLive).Live
		return false
	})
	if l == nil {
		return router.NewLive()
	}
	return l
}
