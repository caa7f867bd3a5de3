package caddymlc

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Auth checks the API keys clients send (see docs/keys.md).
//
// Caddyfile (in mlc_router; keys also in the mlc global option, for
// every mlc_router that names none):
//
//	keys          <file>|redis  (JSON lines: {"name", "sha256", "models", "expires"}; made by caddy mlc-key new or POST /mlc/keys; redis: the cluster's)
//	auth_failures <n>|off       (wrong keys a minute from one client address before its wrong keys get 429s; default 20)
type Auth struct {
	// Keys is the keys file: a JSON line per key (KeyLine), read again
	// within a second of an edit. With it, every request of the API
	// needs one of its keys (Authorization: Bearer, x-api-key or
	// api-key), and the key's name is the request's tenant. Empty: the
	// mlc app's keys, else none checked.
	Keys string `json:"keys,omitempty"`

	// AuthFailures is how many wrong keys a client address may present
	// in a minute; past it the address's wrong keys are answered 429, not
	// 401, for a minute. A missing key is not counted, and a valid key is
	// always served. Default 20; -1 (Caddyfile: off): no bound.
	AuthFailures int `json:"auth_failures,omitempty"`
}

// DefaultAuthFailures is the default of AuthFailures.
const DefaultAuthFailures = 20

// KeysRedis is the keys option's value that keeps the keys in the
// cluster's Redis (the mlc global option's cluster): every replica reads
// them there, so that a key made or revoked through any replica's admin
// API (POST /mlc/keys, DELETE /mlc/keys/{name}) is seen by all within
// a second.
const KeysRedis = apikeys.InRedis

// keysPath is a keys file's absolute path.
func keysPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// provisionAuth takes the keys file's keyring (opening it, or joining
// the one an earlier config opened), when there is a keys file.
func (h *Handler) provisionAuth(app *App) error {
	if h.AuthFailures < -1 {
		return fmt.Errorf("mlc_router: auth_failures %d: want a positive number or off", h.AuthFailures)
	}
	file := h.Keys
	if file == "" && app != nil {
		file = app.Keys
	}
	if file == "" {
		return nil
	}
	key, open, err := keysSource(file, app, h.logger.Named("keys"))
	if err != nil {
		return err
	}
	val, loaded, err := shared.LoadOrNew(key, open)
	if err != nil {
		return fmt.Errorf("mlc_router: keys: %w", err)
	}
	h.held = append(h.held, key)
	h.keys = val.(*apikeys.Keyring)
	if loaded {
		h.keys.SetLogger(h.logger.Named("keys"))
	}
	limit := h.AuthFailures
	if limit == 0 {
		limit = DefaultAuthFailures
	}
	h.failures = apikeys.NewFailureLimiter(limit, h.logger.Named("keys"))
	if app != nil && app.cluster != nil && limit > 0 {
		h.stopFailures = h.failures.ShareOver(app.cluster.pooled.failures)
	}
	return nil
}

// keysSource names the keys of the keys option file in the usage pool,
// and opens them: the file's, or, for KeysRedis, the cluster's Redis.
func keysSource(file string, app *App, log *zap.Logger) (string, func() (caddy.Destructor, error), error) {
	if file != KeysRedis {
		path := keysPath(caddy.NewReplacer().ReplaceAll(file, ""))
		return "mlc-keys/" + path, func() (caddy.Destructor, error) { return apikeys.OpenFile(path, log), nil }, nil
	}
	if app == nil || app.cluster == nil {
		return "", nil, fmt.Errorf("mlc_router: keys redis needs the cluster (the mlc global option's cluster { redis ... })")
	}
	link := app.cluster
	return "mlc-keys/redis/" + link.key, func() (caddy.Destructor, error) { return apikeys.OpenRedis(link.conn, log), nil }, nil
}

// authenticate checks the request's key, when keys are configured: it
// returns the request with its key's name as tenant and its models as
// the allowed ones, or nil when it answered (401, 429). A valid key is
// served whatever its address did; only a wrong key counts against the
// address, and once the address is past auth_failures its wrong keys
// are answered 429 (see docs/keys.md).
func (h *Handler) authenticate(w http.ResponseWriter, req *http.Request) *http.Request {
	if h.keys == nil {
		return req
	}
	now := time.Now()
	key, why := h.keys.Lookup(apikeys.Presented(req), now)
	if why == "" {
		ctx := router.WithFacts(req.Context(), h.factsFor(req, key.Name))
		if len(key.Models) > 0 {
			ctx = router.WithAllowedModels(ctx, key.Models)
		}
		return req.WithContext(ctx)
	}
	authFailures().WithLabelValues(why).Inc()
	if why == apikeys.Unknown {
		addr := clientAddr(req)
		h.failures.Fail(addr, now)
		if wait, held := h.failures.Held(addr, now); held {
			e := protocol.Errorf(http.StatusTooManyRequests, "rate_limit_exceeded", "too many requests with a wrong API key from this address; try again later").WithCode("rate_limit_exceeded")
			e.RetryAfter = wait
			e.WriteFor(w, req.URL.Path)
			return nil
		}
	}
	apikeys.RefusalError(why).WriteFor(w, req.URL.Path)
	return nil
}

// clientAddr is the request's client address: Caddy's client IP (which
// trusted_proxies may take from a header), else the connection's.
func clientAddr(req *http.Request) string {
	if ip, ok := caddyhttp.GetVar(req.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// authFailures counts failed key checks by reason, in every registry
// the module's metrics are registered in.
var authFailures = sync.OnceValue(func() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "caddy", Subsystem: "mlc", Name: "auth_failures_total",
		Help: "Requests refused for their API key, by reason (missing, unknown, expired)."}, []string{"reason"})
})

// registerAuthMetrics adds authFailures to reg, once.
func registerAuthMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(authFailures()); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return err
		}
	}
	return nil
}

// parse reads the keys and auth_failures lines of the Caddyfile.
func (a *Auth) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	name := d.Val()
	var s string
	if err := onceArg(d, seen, &s); err != nil {
		return err
	}
	if name == "keys" {
		a.Keys = s
		return nil
	}
	if s == "off" {
		a.AuthFailures = -1
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return d.Errf("auth_failures %q: want a positive number of failures a minute, or off", s)
	}
	a.AuthFailures = n
	return nil
}
