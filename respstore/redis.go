package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ResponseStore keeps the Responses API's stored responses in the
// cluster's Redis, so that any replica can continue a conversation
// another one started, read it, or delete it. It has the methods of
// router.ResponseStore (records are opaque bytes, keyed by tenant and id)
// without importing the router.
//
// A response's key is <prefix>:responses:<sha256 of the tenant, hex>:
// <sha256 of the id, hex>: no client string becomes a key, and a tenant's
// responses share a key segment. Each is kept for the store's TTL by
// Redis's own expiry (SET … PX). The size of a record is the caller's to
// bound (the router refuses one over responses_max_size before it calls).
//
// Every call has a deadline (ResponseTimeout, longer for a large
// record). While Redis is known to be out of reach (the Conn's monitor
// says so) a call fails at once, without a round trip, with an error
// wrapping ErrDown; a call that fails on the network, or past its
// deadline, wraps ErrDown too and takes the replica off Redis until the
// monitor finds it again.
type ResponseStore struct {
	conn *Conn
	ttl  atomic.Int64 // nanoseconds
}

// Timeouts of a response store's calls: ResponseTimeout, and one more
// second for each ResponseBytesPerSecond of the record written or read
// back (a record may be megabytes; the budgets' 50 ms are for a few
// bytes).
const (
	ResponseTimeout        = time.Second
	ResponseBytesPerSecond = 8 << 20
	// DefaultResponseTTL is the TTL of NewResponseStore's 0: 30 days,
	// as OpenAI keeps stored responses.
	DefaultResponseTTL = 30 * 24 * time.Hour
)

// NewResponseStore returns the response store on c's Redis, keeping each
// response ttl (DefaultResponseTTL when 0 or less).
func NewResponseStore(c *Conn, ttl time.Duration) *ResponseStore {
	s := &ResponseStore{conn: c}
	s.SetTTL(ttl)
	return s
}

// SetTTL sets how long responses stored from now on are kept
// (DefaultResponseTTL when 0 or less).
func (s *ResponseStore) SetTTL(ttl time.Duration) {
	if ttl <= 0 {
		ttl = DefaultResponseTTL
	}
	s.ttl.Store(int64(ttl))
}

// key is the Redis key of the response id of tenant.
func (s *ResponseStore) key(tenant, id string) string {
	t := sha256.Sum256([]byte(tenant))
	i := sha256.Sum256([]byte(id))
	return s.conn.Key("responses", hex.EncodeToString(t[:]), hex.EncodeToString(i[:]))
}

// call runs fn with the deadline of a call moving size bytes, unless
// Redis is known to be out of reach; what it returns besides redis.Nil
// is wrapped in ErrDown when the call failed on the way (not when the
// caller gave up).
func (s *ResponseStore) call(ctx context.Context, what string, size int, fn func(context.Context) error) error {
	// Before the monitor's first answer (a config just started) the
	// call is tried: failing it would refuse what Redis may well serve.
	if s.conn.state.Load() == stateDown {
		return fmt.Errorf("cluster: response store: %s: %w", what, ErrDown)
	}
	timeout := ResponseTimeout + time.Duration(size)*time.Second/ResponseBytesPerSecond
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
	return fmt.Errorf("cluster: response store: %s: %w (%w)", what, ErrDown, err)
}

// Put keeps record as the response id of tenant for the TTL, replacing
// any.
func (s *ResponseStore) Put(ctx context.Context, tenant, id string, record []byte) error {
	ttl := time.Duration(s.ttl.Load())
	return s.call(ctx, "put", len(record), func(ctx context.Context) error {
		return s.conn.Client().Set(ctx, s.key(tenant, id), record, ttl).Err()
	})
}

// Get returns the record of the response id of tenant; found is false
// when there is none (never stored, expired, deleted, or another
// tenant's).
func (s *ResponseStore) Get(ctx context.Context, tenant, id string) ([]byte, bool, error) {
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
		return nil, false, err
	}
	return record, true, nil
}

// Delete forgets the response id of tenant; deleted is false when there
// was none.
func (s *ResponseStore) Delete(ctx context.Context, tenant, id string) (bool, error) {
	var n int64
	err := s.call(ctx, "delete", 0, func(ctx context.Context) error {
		var err error
		n, err = s.conn.Client().Del(ctx, s.key(tenant, id)).Result()
		return err
	})
	return n > 0, err
}
