package apikeys

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// keysPoll is how often a keys file is looked at for an edit.
const keysPoll = 250 * time.Millisecond

// Keyring is the keys of a keys file, read again when the file changes
// (its size, modification time or inode), polled every keysPoll. One per
// file in the usage pool, so that a reload neither doubles its watch
// nor loses it.
type Keyring struct {
	path   string
	redis  *redisKeys // the keys are Redis's, not a file's (path is InRedis)
	log    atomic.Pointer[zap.Logger]
	keys   atomic.Pointer[[]key]
	cancel context.CancelFunc
	done   chan struct{}
}

// OpenFile reads the keys file at path and watches it. A file that
// does not exist yet holds no key: every request is refused until one is
// written.
func OpenFile(path string, log *zap.Logger) *Keyring {
	k := &Keyring{path: path, done: make(chan struct{})}
	k.log.Store(log)
	last := k.load(nil)
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.poll(ctx, "keys file read", func() { last = k.load(last) })
	return k
}

// Destruct stops the watch.
func (k *Keyring) Destruct() error {
	k.cancel()
	<-k.done
	return nil
}

// poll calls read every keysPoll, in a goroutine of its own, until ctx
// is done, then closes k.done. A panic while reading is logged and the
// polls go on.
func (k *Keyring) poll(ctx context.Context, what string, read func()) {
	goroutine.Every(ctx, k.log.Load(), what, func() time.Duration { return keysPoll },
		func() { goroutine.Call(k.log.Load, what, read) }, func() { close(k.done) })
}

// load reads the file unless it is the one last read (nil: read it),
// and returns what it read.
func (k *Keyring) load(last fs.FileInfo) fs.FileInfo {
	st, err := os.Stat(k.path)
	if err != nil {
		if last != nil || !errors.Is(err, fs.ErrNotExist) {
			k.log.Load().Warn("keys file unreadable: no key is accepted", zap.String("file", k.path), zap.Error(err))
		}
		k.keys.Store(&[]key{})
		return nil
	}
	if last != nil && os.SameFile(st, last) && st.Size() == last.Size() && st.ModTime().Equal(last.ModTime()) {
		return last
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		k.log.Load().Warn("keys file unreadable: no key is accepted", zap.String("file", k.path), zap.Error(err))
		k.keys.Store(&[]key{})
		return nil
	}
	keys := parseKeys(b, func(line int, err error) {
		k.log.Load().Warn("keys file: line skipped", zap.String("file", k.path), zap.Int("line", line), zap.Error(err))
	})
	k.keys.Store(&keys)
	k.log.Load().Info("keys file read", zap.String("file", k.path), zap.Int("keys", len(keys)))
	return st
}

// Why a key was refused.
const (
	Missing = "missing"
	Unknown = "unknown"
	Expired = "expired"
)

// Lookup returns the key whose hash is the presented key's, comparing
// every key's hash in constant time; why says why none was accepted.
func (k *Keyring) Lookup(presented string, now time.Time) (key KeyLine, why string) {
	if presented == "" {
		return KeyLine{}, Missing
	}
	sum := sha256.Sum256([]byte(presented))
	found := -1
	keys := *k.keys.Load()
	for i := range keys {
		if subtle.ConstantTimeCompare(sum[:], keys[i].sum[:]) == 1 && found < 0 {
			found = i
		}
	}
	switch {
	case found < 0:
		return KeyLine{}, Unknown
	case !keys[found].Expires.IsZero() && !now.Before(keys[found].Expires):
		return KeyLine{}, Expired
	}
	return keys[found].KeyLine, ""
}

// List returns the keys read.
func (k *Keyring) List() []KeyLine {
	keys := *k.keys.Load()
	out := make([]KeyLine, len(keys))
	for i := range keys {
		out[i] = keys[i].KeyLine
	}
	return out
}

// Path is the keys file's path, or InRedis.
func (k *Keyring) Path() string { return k.path }

// SetLogger makes log the keyring's logger (a config that joins a
// keyring an earlier one opened logs its own way).
func (k *Keyring) SetLogger(log *zap.Logger) { k.log.Store(log) }

// Create makes a random key for line's name and keeps its line (in the
// file, or Redis), read again at once; it returns the key, which is
// nowhere else.
func (k *Keyring) Create(ctx context.Context, line KeyLine) (string, error) {
	key, j, err := freshKey(&line)
	if err != nil {
		return "", err
	}
	if k.redis != nil {
		return key, k.redis.add(ctx, line, j)
	}
	if err := appendLine(k.path, j); err != nil {
		return "", err
	}
	k.load(nil)
	return key, nil
}

// Revoke removes the keys of name (from the file, or Redis), read again
// at once, and says how many there were.
func (k *Keyring) Revoke(ctx context.Context, name string) (int, error) {
	if k.redis != nil {
		return k.redis.remove(ctx, name)
	}
	n, err := removeLines(k.path, name)
	if n > 0 {
		k.load(nil)
	}
	return n, err
}
