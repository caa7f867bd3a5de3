package caddymlc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// listedKey is a key as GET /mlc/keys lists it: never its hash whole.
type listedKey struct {
	Name    string    `json:"name"`
	Models  []string  `json:"models,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	// SHA256Prefix is the first 8 hex digits of the key's hash, to tell
	// two keys of one name apart.
	SHA256Prefix string `json:"sha256_prefix"`
	File         string `json:"file"`
}

// keyrings are the keys files of every loaded config.
func keyrings() []*keyring {
	var out []*keyring
	shared.Range(func(key, val any) bool {
		if !strings.HasPrefix(key.(string), "mlc-keys/") {
			return true
		}
		switch k := val.(type) {
		case *keyring:
			out = append(out, k)
		case *redisKeyring:
			out = append(out, k.keyring)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *keyring) int { return strings.Compare(a.path, b.path) })
	return out
}

// serveKeys answers GET /mlc/keys: the keys of every keys file loaded.
func serveKeys(w http.ResponseWriter, r *http.Request) error {
	out := []listedKey{}
	for _, k := range keyrings() {
		for _, key := range k.list() {
			out = append(out, listedKey{Name: key.Name, Models: key.Models, Expires: key.Expires, SHA256Prefix: strings.ToLower(key.SHA256[:8]), File: k.path})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

// revokeKey answers DELETE /mlc/keys/{name}: the lines of that name are
// removed from every keys file loaded, which is read again at once, and
// from Redis (the keys redis option).
func revokeKey(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	removed := 0
	for _, k := range keyrings() {
		var n int
		var err error
		if k.redis != nil {
			n, err = k.redis.remove(r.Context(), name)
		} else if n, err = removeKeyLines(k.path, name); n > 0 {
			k.load(nil)
		}
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("keys %s: %w", k.path, err)}
		}
		removed += n
	}
	if removed == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key named %q", name)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]any{"name": name, "removed": removed})
}

// removeKeyLines rewrites the keys file without the lines of name
// (through a file renamed over it, 0600), and says how many it removed.
func removeKeyLines(path, name string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var kept bytes.Buffer
	removed := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, err := parseKeyLine(strings.TrimSpace(sc.Text())); err == nil && k.Name == name {
			removed++
			continue
		}
		kept.Write(sc.Bytes())
		kept.WriteByte('\n')
	}
	if err := sc.Err(); err != nil || removed == 0 {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(kept.Bytes()); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	return removed, os.Rename(tmp.Name(), path)
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
