// Package cluster is what several Caddy replicas with the same mlc_router
// config share through one Redis server: a connection whose health the
// replica follows (Conn), the tenants' budgets (BudgetStore) and a batched
// publish/subscribe bus (Conn.Publish, Conn.Subscribe) on which Sharing
// carries each replica's in-flight requests and what it learns of the
// engines' prefix caches (prefixevent.go: an event's wire form), and
// FailedChecks the failed API key checks; the API keys themselves (Keys)
// when the adapter keeps them in Redis. The Caddy adapter is its only
// user: it sits above router/, which it imports.
//
// Redis is never a single point of failure: every call on a request's
// path has a short deadline, and while Redis is out of reach the callers
// go on with local state (stored responses, which have none, fail at
// once with ErrDown: see respstore.Redis); a background loop pings it
// with a backoff and the replica rejoins by itself when it answers.
package cluster

import (
	"crypto/tls"
	"time"

	"go.uber.org/zap"
)

// Defaults of Options.
const (
	DefaultPrefix  = "caddy-mlc"
	DefaultTimeout = 50 * time.Millisecond
)

// Options say how to reach Redis and how to name what the cluster keeps
// there.
type Options struct {
	// Addr is Redis's host:port.
	Addr string
	// Username and Password authenticate (Redis's AUTH; empty: none).
	Username, Password string
	// TLS, when not nil, is the TLS client config of the connection.
	TLS *tls.Config
	// Prefix begins every key and channel (default DefaultPrefix), so
	// that several clusters, or other programs, can share one Redis.
	Prefix string
	// Timeout bounds each call made on a request's path (default
	// DefaultTimeout): past it the caller goes on with local state.
	Timeout time.Duration
	// Logger logs the connection's changes (up, down); nil: none.
	Logger *zap.Logger
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}
