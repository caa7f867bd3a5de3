package caddymlc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
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
func keyrings() []*apikeys.Keyring {
	var out []*apikeys.Keyring
	shared.Range(func(key, val any) bool {
		if !strings.HasPrefix(key.(string), "mlc-keys/") {
			return true
		}
		out = append(out, val.(*apikeys.Keyring))
		return true
	})
	slices.SortFunc(out, func(a, b *apikeys.Keyring) int { return strings.Compare(a.Path(), b.Path()) })
	return out
}

// serveKeys answers GET /mlc/keys: the keys of every keys file loaded.
func serveKeys(w http.ResponseWriter, r *http.Request) error {
	out := []listedKey{}
	for _, k := range keyrings() {
		for _, key := range k.List() {
			out = append(out, listedKey{Name: key.Name, Models: key.Models, Expires: key.Expires, SHA256Prefix: strings.ToLower(key.SHA256[:8]), File: k.Path()})
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
		n, err := k.Revoke(r.Context(), name)
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("keys %s: %w", k.Path(), err)}
		}
		removed += n
	}
	if removed == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key named %q", name)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]any{"name": name, "removed": removed})
}

// createKey answers POST /mlc/keys ({"name", "models", "expires"}): a new
// key for name, in the keys file, or Redis, of every config loaded (the
// first of them, when several); the key is in the answer, once, and
// nowhere else.
func createKey(w http.ResponseWriter, r *http.Request) error {
	var line apikeys.KeyLine
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&line); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(`want {"name": ..., "models": [...], "expires": RFC 3339}: %v`, err)}
	}
	name, err := apikeys.KeyName(line.Name)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	line.Name = name
	rings := keyrings()
	if len(rings) == 0 {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no keys option is loaded")}
	}
	k := rings[0]
	key, err := k.Create(r.Context(), line)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("keys %s: %w", k.Path(), err)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(map[string]any{"name": line.Name, "key": key, "keys": k.Path()})
}
