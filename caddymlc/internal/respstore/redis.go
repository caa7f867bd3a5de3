package respstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/router/responsestore"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-mlc/caddy-mlc/cluster"
)

// Redis keeps the Responses API's stored responses in the cluster's
// Redis, so that any replica can continue a conversation another one
// started, read it, or delete it.
//
// A response's key is <prefix>:responses:<sha256 of the tenant, hex>:
// <sha256 of the id, hex>: no client string becomes a key, and a tenant's
// responses share a key segment. Each is kept for the store's TTL by
// Redis's own expiry (SET … PX). The size of a record is the caller's to
// bound (the router refuses one over responses_max_size before it calls).
//
// Every call has a deadline (RedisTimeout, longer for a large
// record). While Redis is known to be out of reach (the Conn's monitor
// says so) a call fails at once, without a round trip, with an error
// wrapping cluster.ErrDown; a call that fails on the network, or past its
// deadline, wraps cluster.ErrDown too and takes the replica off Redis
// until the monitor finds it again. Such errors wrap
// responsestore.ErrUnavailable as well: a read is then a 503, not a 404.
type Redis struct {
	conn *cluster.Conn
	ttl  atomic.Int64 // nanoseconds
}

// Timeouts of a Redis store's calls: RedisTimeout, and one more second
// for each RedisBytesPerSecond of the record written or read back (a
// record may be megabytes; the budgets' 50 ms are for a few bytes).
const (
	RedisTimeout        = time.Second
	RedisBytesPerSecond = 8 << 20
)

// NewRedis returns the response store on c's Redis, keeping each
// response ttl (DefaultTTL when 0 or less).
func NewRedis(c *cluster.Conn, ttl time.Duration) *Redis {
	s := &Redis{conn: c}
	s.SetTTL(ttl)
	return s
}

// SetTTL sets how long responses stored from now on are kept
// (DefaultTTL when 0 or less).
func (s *Redis) SetTTL(ttl time.Duration) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	s.ttl.Store(int64(ttl))
}

// key is the Redis key of the response id of tenant.
func (s *Redis) key(tenant, id string) string {
	t := sha256.Sum256([]byte(tenant))
	i := sha256.Sum256([]byte(id))
	return s.conn.Key("responses", hex.EncodeToString(t[:]), hex.EncodeToString(i[:]))
}

// call runs fn with the deadline of a call moving size bytes, unless
// Redis is known to be out of reach; what it returns besides redis.Nil
// is wrapped in cluster.ErrDown when the call failed on the way (not when the
// caller gave up).
func (s *Redis) call(ctx context.Context, what string, size int, fn func(context.Context) error) error {
	// Before the monitor's first answer (a config just started) the
	// call is tried: failing it would refuse what Redis may well serve.
	if s.conn.Down() {
		return fmt.Errorf("cluster: response store: %s: %w", what, cluster.ErrDown)
	}
	timeout := RedisTimeout + time.Duration(size)*time.Second/RedisBytesPerSecond
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := fn(callCtx)
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("cluster: response store: %s: %w", what, ctx.Err())
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Redis answered, with an error of its own (out of memory, a
		// refused command): it is up, and the answer says why.
		return fmt.Errorf("cluster: response store: %s: %w", what, err)
	}
	s.conn.Failed(err)
	return fmt.Errorf("cluster: response store: %s: %w (%w)", what, cluster.ErrDown, err)
}

// Put keeps record as the response id of tenant for the TTL, replacing
// any.
func (s *Redis) Put(ctx context.Context, tenant, id string, record []byte) error {
	ttl := time.Duration(s.ttl.Load())
	return unavailable(s.call(ctx, "put", len(record), func(ctx context.Context) error {
		return s.conn.Client().Set(ctx, s.key(tenant, id), record, ttl).Err()
	}))
}

// Get returns the record of the response id of tenant; found is false
// when there is none (never stored, expired, deleted, or another
// tenant's).
func (s *Redis) Get(ctx context.Context, tenant, id string) ([]byte, bool, error) {
	var record []byte
	// The record's size is unknown before it is read: the deadline of
	// the largest the router stores by default.
	err := s.call(ctx, "get", 16<<20, func(ctx context.Context) error {
		var err error
		record, err = s.conn.Client().Get(ctx, s.key(tenant, id)).Bytes()
		return err
	})
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, unavailable(err)
	}
	return record, true, nil
}

// Delete forgets the response id of tenant; deleted is false when there
// was none.
func (s *Redis) Delete(ctx context.Context, tenant, id string) (bool, error) {
	var n int64
	err := s.call(ctx, "delete", 0, func(ctx context.Context) error {
		var err error
		n, err = s.conn.Client().Del(ctx, s.key(tenant, id)).Result()
		return err
	})
	return n > 0, unavailable(err)
}

// unavailable marks err as the responsestore.ErrUnavailable when Redis
// is out of reach.
func unavailable(err error) error {
	if errors.Is(err, cluster.ErrDown) {
		return fmt.Errorf("%w: %w", responsestore.ErrUnavailable, err)
	}
	return err
}
