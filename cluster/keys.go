package cluster

import (
	"context"
	"time"
)

// Keys are the API keys the replicas share (the adapter's keys redis
// option): a Redis hash, <prefix>:keys, each field a key's SHA-256 (hex)
// and its value the key's line (JSON), which the adapter reads and
// writes; a key made or revoked through any replica is in the hash for
// all. Keys are read off the request's path: each call is bounded by the
// cluster's timeout, at least a second.
type Keys struct{ conn *Conn }

// NewKeys is the keys kept in c's Redis.
func NewKeys(c *Conn) *Keys { return &Keys{conn: c} }

// hash is the Redis hash of the keys.
func (k *Keys) hash() string { return k.conn.Key("keys") }

// call bounds one Redis call.
func (k *Keys) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(k.conn.Timeout(), time.Second))
}

// Lines returns every key's line, by the key's SHA-256.
func (k *Keys) Lines(ctx context.Context) (map[string]string, error) {
	ctx, cancel := k.call(ctx)
	defer cancel()
	return k.conn.Client().HGetAll(ctx, k.hash()).Result()
}

// Put stores the line of the key whose SHA-256 is sum.
func (k *Keys) Put(ctx context.Context, sum string, line []byte) error {
	ctx, cancel := k.call(ctx)
	defer cancel()
	return k.conn.Client().HSet(ctx, k.hash(), sum, line).Err()
}

// Delete removes the lines of the keys whose SHA-256 are sums.
func (k *Keys) Delete(ctx context.Context, sums ...string) error {
	if len(sums) == 0 {
		return nil
	}
	ctx, cancel := k.call(ctx)
	defer cancel()
	return k.conn.Client().HDel(ctx, k.hash(), sums...).Err()
}
