package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// KeysRedis is the keys option's value that keeps the keys in the
// cluster's Redis (the mlc global option's cluster): every replica reads
// them there, so that a key made or revoked through any replica's admin
// API (POST /mlc/keys, DELETE /mlc/keys/{name}) is seen by all within
// keysPoll.
const KeysRedis = "redis"

// redisKeyring is a keyring whose keys are a Redis hash,
// <key_prefix>:keys, each field a key's SHA-256 and its value the key's
// line; it reads the hash every keysPoll. While Redis is out of reach
// it keeps the keys it read last (a revocation then waits for Redis to
// come back), and says so once.
type redisKeyring struct {
	*keyring
	conn *cluster.Conn
	down atomic.Bool // the last read failed
}

// openRedisKeyring reads the keys from conn's Redis and keeps reading
// them.
func openRedisKeyring(conn *cluster.Conn, log *zap.Logger) *redisKeyring {
	k := &redisKeyring{keyring: &keyring{path: KeysRedis, done: make(chan struct{})}, conn: conn}
	k.log.Store(log)
	k.keys.Store(&[]apiKey{})
	k.redis = k
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.read(ctx)
	goroutine.Go(log, "keys in Redis", func() {
		defer close(k.done)
		k.poll(ctx, "keys in Redis read", func() { k.read(ctx) })
	}, nil)
	return k
}

// hash is the Redis hash of the keys.
func (k *redisKeyring) hash() string { return k.conn.Key("keys") }

// call bounds one Redis call: the cluster's timeout, at least a second
// (the keys are read off any request's path).
func (k *redisKeyring) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(k.conn.Timeout(), time.Second))
}

// read reads the keys from Redis.
func (k *redisKeyring) read(ctx context.Context) {
	ctx, cancel := k.call(ctx)
	defer cancel()
	fields, err := k.conn.Client().HGetAll(ctx, k.hash()).Result()
	if err != nil {
		if !k.down.Swap(true) {
			k.log.Load().Warn("keys in Redis unreadable: the keys read last are kept", zap.Error(err))
		}
		return
	}
	if k.down.Swap(false) {
		k.log.Load().Info("keys in Redis readable again")
	}
	keys := make([]apiKey, 0, len(fields))
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
func (k *redisKeyring) add(ctx context.Context, line KeyLine, j []byte) error {
	ctx, cancel := k.call(ctx)
	defer cancel()
	if err := k.conn.Client().HSet(ctx, k.hash(), line.SHA256, j).Err(); err != nil {
		return err
	}
	k.read(ctx)
	return nil
}

// remove deletes the keys of name, and says how many there were.
func (k *redisKeyring) remove(ctx context.Context, name string) (int, error) {
	ctx, cancel := k.call(ctx)
	defer cancel()
	fields, err := k.conn.Client().HGetAll(ctx, k.hash()).Result()
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
	if err := k.conn.Client().HDel(ctx, k.hash(), gone...).Err(); err != nil {
		return 0, err
	}
	k.read(ctx)
	return len(gone), nil
}

// createKey answers POST /mlc/keys ({"name", "models", "expires"}): a new
// key for name, in the keys file, or Redis, of every config loaded (the
// first of them, when several); the key is in the answer, once, and
// nowhere else.
func createKey(w http.ResponseWriter, r *http.Request) error {
	var line KeyLine
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&line); err != nil || line.Name == "" {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(`want {"name": ..., "models": [...], "expires": RFC 3339}: %v`, err)}
	}
	rings := keyrings()
	if len(rings) == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no keys option is loaded")}
	}
	k := rings[0]
	key, j, err := freshKey(&line)
	if err == nil {
		if k.redis != nil {
			err = k.redis.add(r.Context(), line, j)
		} else if err = appendLine(k.path, j); err == nil {
			k.load(nil)
		}
	}
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("keys %s: %w", k.path, err)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(map[string]any{"name": line.Name, "key": key, "keys": k.path})
}
