package apikeys

import (
	"context"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
)

// InRedis is the Path of a keyring whose keys are the cluster's Redis's.
const InRedis = "redis"

// redisKeys is what a keyring whose keys are the cluster's
// (cluster.Keys) reads them with;
// it reads them every keysPoll. While Redis is out of reach it keeps the
// keys it read last (a revocation then waits for Redis to come back),
// and says so once.
type redisKeys struct {
	*Keyring
	store *cluster.Keys
	down  atomic.Bool // the last read failed
}

// OpenRedis reads the keys from conn's Redis (every replica's: a key
// made or revoked through any replica is seen by all within keysPoll)
// and keeps reading them.
func OpenRedis(conn *cluster.Conn, log *zap.Logger) *Keyring {
	k := &redisKeys{Keyring: &Keyring{path: InRedis, done: make(chan struct{})}, store: cluster.NewKeys(conn)}
	k.log.Store(log)
	k.keys.Store(&[]key{})
	k.redis = k
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.read(ctx)
	k.poll(ctx, "keys in Redis read", func() { k.read(ctx) })
	return k.Keyring
}

// read reads the keys from Redis.
func (k *redisKeys) read(ctx context.Context) {
	fields, err := k.store.Lines(ctx)
	if err != nil {
		if !k.down.Swap(true) {
			k.log.Load().Warn("keys in Redis unreadable: the keys read last are kept", zap.Error(err))
		}
		return
	}
	if k.down.Swap(false) {
		k.log.Load().Info("keys in Redis readable again")
	}
	keys := make([]key, 0, len(fields))
	for field, line := range fields {
		key, err := parseKeyLine(line)
		if err != nil || key.SHA256 != field {
			k.log.Load().Warn("keys in Redis: entry skipped", zap.String("field", field[:min(8, len(field))]), zap.Error(err))
			continue
		}
		keys = append(keys, key)
	}
	k.keys.Store(&keys)
}

// add stores a key's line.
func (k *redisKeys) add(ctx context.Context, line KeyLine, j []byte) error {
	if err := k.store.Put(ctx, line.SHA256, j); err != nil {
		return err
	}
	k.read(ctx)
	return nil
}

// remove deletes the keys of name, and says how many there were.
func (k *redisKeys) remove(ctx context.Context, name string) (int, error) {
	fields, err := k.store.Lines(ctx)
	if err != nil {
		return 0, err
	}
	var gone []string
	for field, line := range fields {
		if key, err := parseKeyLine(line); err == nil && key.Name == name {
			gone = append(gone, field)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if err := k.store.Delete(ctx, gone...); err != nil {
		return 0, err
	}
	k.read(ctx)
	return len(gone), nil
}
