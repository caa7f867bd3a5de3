package caddymlc

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/caddy-mlc/caddy-mlc/router/responsestore"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/respstore"
)

// Responses says where the Responses API keeps the responses it stores
// (store: true, the API's default, and previous_response_id), and for how
// long. Every model of the handler shares the store.
//
// With the mlc app's cluster option the responses are kept in the
// cluster's Redis by default, so that any replica can read, continue or
// delete a response another one stored; without it, in an SQLite file.
// A path forces the SQLite file even with the cluster option (replicas
// on one host may share one file; replicas on several hosts each keep
// their own, and a conversation continues only where it began).
//
// Caddyfile:
//
//	responses_store    <path>|redis|off  (default: redis with the cluster option, else mlc/responses.db in Caddy's data directory)
//	responses_ttl      <duration>        (default: 30 days)
//	responses_max_size <size>            (default: 16MiB)
type Responses struct {
	// ResponsesStore is the SQLite file of stored responses, relative to
	// Caddy's data directory unless absolute (write ./redis for a file
	// named redis); "redis": the cluster's Redis (the cluster option is
	// then required); "off": none (responses are answered with store
	// false, previous_response_id is refused). Default: the cluster's
	// Redis with the cluster option, else mlc/responses.db in Caddy's
	// data directory.
	ResponsesStore string `json:"responses_store,omitempty"`

	// ResponsesTTL is how long a stored response is kept. Default 30
	// days, as OpenAI keeps them.
	ResponsesTTL caddy.Duration `json:"responses_ttl,omitempty"`

	// ResponsesMaxSize bounds one stored response, in bytes: the
	// response, its input and the conversation before it (a response
	// that continues another stores the conversation so far). A
	// conversation over it is a 400 that says so. Default 16 MiB.
	ResponsesMaxSize int64 `json:"responses_max_size,omitempty"`
}

// Interface guard: the stores are the router's response store.
var (
	_ responsestore.Store = (*respstore.SQLite)(nil)
	_ responsestore.Store = (*respstore.Redis)(nil)
)

// The responses_store values that are no file: none, the cluster's
// Redis.
const (
	storeOff   = "off"
	storeRedis = "redis"
)

// responsesPath is the store's file; "" for none.
func (c Responses) responsesPath() string {
	switch {
	case c.ResponsesStore == storeOff || c.ResponsesStore == storeRedis:
		return ""
	case c.ResponsesStore == "":
		return filepath.Join(caddy.AppDataDir(), "mlc", "responses.db")
	case filepath.IsAbs(c.ResponsesStore):
		return filepath.Clean(c.ResponsesStore)
	}
	return filepath.Join(caddy.AppDataDir(), c.ResponsesStore)
}

// validate checks the bounds.
func (c Responses) validate() error {
	if c.ResponsesTTL < 0 || c.ResponsesMaxSize < 0 || c.ResponsesMaxSize > math.MaxInt32 {
		return fmt.Errorf("mlc_router: responses_ttl and responses_max_size must be positive (and the size under 2 GiB)")
	}
	return nil
}

// sharedStore is a store in the usage pool: it outlives a config, so
// that a reload keeps the file open, and is closed with the last config
// that uses it.
type sharedStore struct{ *respstore.SQLite }

// Destruct closes the store.
func (s sharedStore) Destruct() error { return s.Close() }

// provisionResponses opens the response store (or takes the one an
// earlier config opened) and gives it to the front: on the cluster's
// Redis when cl is not nil (the cluster option) and responses_store
// names no file.
func (h *Handler) provisionResponses(cl *clusterLink) error {
	if err := h.Responses.validate(); err != nil {
		return err
	}
	switch {
	case h.ResponsesStore == storeRedis && cl == nil:
		return fmt.Errorf("mlc_router: responses_store redis needs the mlc app's cluster option (mlc { cluster { redis <host:port> } })")
	case cl != nil && (h.ResponsesStore == storeRedis || h.ResponsesStore == ""):
		// Nothing to open or close: the store is the cluster's
		// connection, which the app holds.
		h.front.StoreResponses(respstore.NewRedis(cl.conn, time.Duration(h.ResponsesTTL)), int(h.ResponsesMaxSize))
		return nil
	}
	path := h.responsesPath()
	if path == "" {
		return nil
	}
	ttl := time.Duration(h.ResponsesTTL)
	key := "mlc-responses/" + path
	val, loaded, err := shared.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := respstore.Open(path, ttl)
		return sharedStore{s}, err
	})
	switch {
	case err != nil && h.ResponsesStore == "":
		// The default store is a convenience: a data directory Caddy
		// cannot write must not keep the models from being served.
		h.logger.Warn("the Responses API keeps no responses: its default store cannot be opened (set responses_store)",
			zap.String("path", path), zap.Error(err))
		return nil
	case err != nil:
		return fmt.Errorf("mlc_router: %w", err)
	}
	h.held = append(h.held, key)
	s := val.(sharedStore)
	if loaded {
		s.SetTTL(ttl)
	}
	h.front.StoreResponses(s.SQLite, int(h.ResponsesMaxSize))
	return nil
}

// parse reads one responses_* line of the Caddyfile; seen holds the
// options already given.
func (c *Responses) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	name := d.Val()
	var s string
	if err := onceArg(d, seen, &s); err != nil {
		return err
	}
	switch name {
	case "responses_store":
		c.ResponsesStore = s
	case "responses_ttl":
		dur, err := positiveDuration(s)
		if err != nil {
			return d.Errf("responses_ttl %q: want a positive duration such as 720h", s)
		}
		c.ResponsesTTL = dur
	case "responses_max_size":
		n, err := humanize.ParseBytes(s)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return d.Errf("responses_max_size %q: want a size such as 16MiB (under 2GiB)", s)
		}
		c.ResponsesMaxSize = int64(n)
	}
	return nil
}
