package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// How the monitor follows Redis: a ping every pingInterval while it
// answers; while it does not, pings after a backoff of rejoinMin
// doubling to rejoinMax, the backoff starting over once Redis has
// answered for stableAfter (so that a Redis that answers pings but not
// calls in time is not hammered).
const (
	pingInterval = time.Second
	rejoinMin    = 50 * time.Millisecond
	rejoinMax    = 2 * time.Second
	stableAfter  = 30 * time.Second
)

// The states of a Conn.
const (
	stateUnknown int32 = iota
	stateUp
	stateDown
)

// Conn is a replica's connection to the cluster's Redis, and whether
// Redis answers: callers skip Redis at once while it does not, rather
// than each waiting out a deadline.
type Conn struct {
	opts   Options
	client *redis.Client
	log    *zap.Logger
	// id tells this replica's messages on the bus from the others'.
	id uint64

	// state is stateUnknown until the first ping, then stateUp or
	// stateDown.
	state   atomic.Int32
	mu      sync.Mutex    // orders the changes of state
	changed chan struct{} // closed at the next change of state
	// check asks the monitor to look again: a call failed.
	check chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	start  sync.Once
	wg     sync.WaitGroup

	bus bus
}

// New returns a Conn to o.Addr. It connects nothing until Start.
func New(o Options) *Conn {
	o = o.withDefaults()
	sharedMetrics()
	setLibraryLogger(o.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := &Conn{
		opts: o,
		client: redis.NewClient(&redis.Options{
			Addr: o.Addr, Username: o.Username, Password: o.Password, TLSConfig: o.TLS,
			// The callers' deadlines bound every call, dials included; a
			// failed call is not retried (the caller goes on without it).
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			DialTimeout:           max(time.Second, o.Timeout),
			DisableIdentity:       true,
			MaintNotificationsConfig: &maintnotifications.Config{
				Mode: maintnotifications.ModeDisabled,
			},
		}),
		log:     o.Logger,
		id:      binary.LittleEndian.Uint64(id[:]),
		changed: make(chan struct{}),
		check:   make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
	}
	c.bus.init()
	return c
}

// Start starts following Redis (and the bus); once.
func (c *Conn) Start() {
	c.start.Do(func() {
		c.spawn("the cluster's Redis monitor", c.monitor)
		c.spawn("the cluster's publisher", c.publish)
		c.spawn("the cluster's subscriber", c.subscribe)
	})
}

// spawn runs fn on a recovered goroutine that Close waits for; a panic
// restarts it, unless the Conn is closed.
func (c *Conn) spawn(what string, fn func()) {
	c.wg.Add(1)
	goroutine.Go(c.log, what, func() {
		defer c.wg.Done()
		fn()
	}, func(any) {
		if c.ctx.Err() == nil {
			c.spawn(what, fn)
		}
	})
}

// Close stops following Redis and closes the connection.
func (c *Conn) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.client.Close()
}

// Up reports whether Redis answers: when it does not, callers go on with
// local state without calling it.
func (c *Conn) Up() bool { return c.state.Load() == stateUp }

// Down reports whether the monitor found Redis out of reach: false before
// its first answer too, when a call is worth trying.
func (c *Conn) Down() bool { return c.state.Load() == stateDown }

// Watch returns whether Redis answers, and a channel closed at the next
// change.
func (c *Conn) Watch() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Up(), c.changed
}

// Timeout is the deadline of a call on a request's path.
func (c *Conn) Timeout() time.Duration { return c.opts.Timeout }

// Key returns the name of a key or channel: the prefix, then parts,
// joined by ":".
func (c *Conn) Key(parts ...string) string {
	return c.opts.Prefix + ":" + strings.Join(parts, ":")
}

// Client is the Redis client, for the cluster's own stores.
func (c *Conn) Client() *redis.Client { return c.client }

// Failed tells that a call to Redis failed: the replica goes on with local
// state until the monitor finds that Redis answers again.
func (c *Conn) Failed(err error) {
	if !c.Up() {
		return
	}
	c.set(false, err)
	select {
	case c.check <- struct{}{}:
	default:
	}
}

// monitor pings Redis and sets Up from the answers, until Close.
func (c *Conn) monitor() {
	b := backoff.Backoff{Min: rejoinMin, Max: rejoinMax}
	var upSince time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.check:
			// A call failed: look again after a backoff, not at once.
			timer.Reset(b.Next())
			continue
		case <-timer.C:
		}
		if err := c.ping(); err != nil {
			c.set(false, err)
			timer.Reset(b.Next())
			continue
		}
		if !c.Up() {
			upSince = time.Now()
			c.set(true, nil)
		} else if time.Since(upSince) > stableAfter {
			b.Reset()
		}
		timer.Reset(pingInterval)
	}
}

// ping asks Redis for a PING. Its deadline covers a dial (and a TLS
// handshake), which a request's call rarely pays.
func (c *Conn) ping() error {
	ctx, cancel := context.WithTimeout(c.ctx, max(time.Second, c.opts.Timeout))
	defer cancel()
	return c.client.Ping(ctx).Err()
}

// set records whether Redis answers; a change (the first answer
// included) is logged once and shown in caddy_mlc_cluster_up.
func (c *Conn) set(up bool, err error) {
	state := stateDown
	if up {
		state = stateUp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Swap(state) == state {
		return
	}
	if up {
		upGauge.Set(1)
		c.log.Info("cluster: Redis answers; sharing budgets and prefixes with the other replicas", zap.String("redis", c.opts.Addr))
	} else {
		upGauge.Set(0)
		c.log.Warn("cluster: Redis out of reach; going on with local state until it answers", zap.String("redis", c.opts.Addr), zap.Error(err))
	}
	close(c.changed)
	c.changed = make(chan struct{})
}
