package caddymlc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// KeyLine is one line of a keys file (JSON lines): an API key by the
// SHA-256 of the key (hex), never the key; its name is the tenant of
// its requests.
type KeyLine struct {
	Name   string   `json:"name"`
	SHA256 string   `json:"sha256"`
	Models []string `json:"models,omitempty"`
	// Expires, when set, is when the key stops being accepted.
	Expires time.Time `json:"expires,omitzero"`
}

// apiKey is a KeyLine read: its hash as bytes.
type apiKey struct {
	KeyLine
	sum [sha256.Size]byte
}

// keysPoll is how often a keys file is looked at for an edit.
const keysPoll = 250 * time.Millisecond

// keyring is the keys of a keys file, read again when the file changes
// (its size, modification time or inode), polled every keysPoll. One per
// file in the usage pool, so that a reload neither doubles its watch
// nor loses it.
type keyring struct {
	path   string
	redis  *redisKeyring // the keys are Redis's, not a file's (path is KeysRedis)
	log    atomic.Pointer[zap.Logger]
	keys   atomic.Pointer[[]apiKey]
	cancel context.CancelFunc
	done   chan struct{}
}

// openKeyring reads the keys file at path and watches it. A file that
// does not exist yet holds no key: every request is refused until one is
// written.
func openKeyring(path string, log *zap.Logger) *keyring {
	k := &keyring{path: path, done: make(chan struct{})}
	k.log.Store(log)
	last := k.load(nil)
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	goroutine.Go(log, "keys file watch", func() {
		defer close(k.done)
		k.watch(ctx, last)
	}, nil)
	return k
}

// Destruct stops the watch.
func (k *keyring) Destruct() error {
	k.cancel()
	<-k.done
	return nil
}

// watch reads the file again whenever it changes, until ctx is done.
func (k *keyring) watch(ctx context.Context, last fs.FileInfo) {
	k.poll(ctx, "keys file read", func() { last = k.load(last) })
}

// poll calls read every keysPoll until ctx is done. A panic while
// reading is logged and the polls go on.
func (k *keyring) poll(ctx context.Context, what string, read func()) {
	t := time.NewTicker(keysPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		goroutine.Call(k.log.Load, what, read)
	}
}

// load reads the file unless it is the one last read (nil: read it),
// and returns what it read.
func (k *keyring) load(last fs.FileInfo) fs.FileInfo {
	st, err := os.Stat(k.path)
	if err != nil {
		if last != nil || !errors.Is(err, fs.ErrNotExist) {
			k.log.Load().Warn("keys file unreadable: no key is accepted", zap.String("file", k.path), zap.Error(err))
		}
		k.keys.Store(&[]apiKey{})
		return nil
	}
	if last != nil && os.SameFile(st, last) && st.Size() == last.Size() && st.ModTime().Equal(last.ModTime()) {
		return last
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		k.log.Load().Warn("keys file unreadable: no key is accepted", zap.String("file", k.path), zap.Error(err))
		k.keys.Store(&[]apiKey{})
		return nil
	}
	keys := parseKeys(b, func(line int, err error) {
		k.log.Load().Warn("keys file: line skipped", zap.String("file", k.path), zap.Int("line", line), zap.Error(err))
	})
	k.keys.Store(&keys)
	k.log.Load().Info("keys file read", zap.String("file", k.path), zap.Int("keys", len(keys)))
	return st
}

// parseKeys reads a keys file: a KeyLine a line; empty lines and lines
// that begin with # are skipped; a bad line is told to bad and skipped.
func parseKeys(b []byte, bad func(line int, err error)) []apiKey {
	var keys []apiKey
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			bad(n, err)
			continue
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		bad(0, err)
	}
	return keys
}

// parseKeyLine reads one line of a keys file.
func parseKeyLine(line string) (apiKey, error) {
	var k apiKey
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k.KeyLine); err != nil {
		return k, fmt.Errorf("want {\"name\": ..., \"sha256\": ..., \"models\": [...], \"expires\": RFC 3339}: %w", err)
	}
	if strings.TrimSpace(k.Name) == "" {
		return k, errors.New("no name")
	}
	sum, err := hex.DecodeString(k.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return k, fmt.Errorf("key %s: sha256: want 64 hex digits (the key's SHA-256, not the key)", k.Name)
	}
	copy(k.sum[:], sum)
	return k, nil
}

// Why a key was refused.
const (
	keyMissing = "missing"
	keyUnknown = "unknown"
	keyExpired = "expired"
)

// lookup returns the key whose hash is the presented key's, comparing
// every key's hash in constant time; why says why none was accepted.
func (k *keyring) lookup(presented string, now time.Time) (key KeyLine, why string) {
	if presented == "" {
		return KeyLine{}, keyMissing
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
		return KeyLine{}, keyUnknown
	case !keys[found].Expires.IsZero() && !now.Before(keys[found].Expires):
		return KeyLine{}, keyExpired
	}
	return keys[found].KeyLine, ""
}

// list returns the keys read.
func (k *keyring) list() []apiKey { return *k.keys.Load() }
