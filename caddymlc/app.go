package caddymlc

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

func init() {
	caddy.RegisterModule(new(App))
}

// fleets holds the running engine fleets of every loaded config, keyed by
// engine.Spec.Key. On `caddy reload` the new config is started before the
// old one is stopped: a fleet with an unchanged spec is then found here and
// kept, instead of a second set of engines racing for the same ports.
var fleets = caddy.NewUsagePool()

// App is the "mlc" Caddy app. mlc_router handlers register their engine
// fleets with it while they are provisioned; the app starts the fleets when
// the config starts, and releases them when it stops. Starting engines in
// the app's Start, not in a handler's Provision, is what keeps
// `caddy validate` and `caddy adapt --validate` from spawning engines: Caddy
// provisions modules to validate a config, but starts apps only to run it.
type App struct {
	logger *zap.Logger
	mu     sync.Mutex
	specs  map[string]*fleetHandle // by spec key
	held   []string                // keys whose fleets this config holds
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "mlc", New: func() caddy.Module { return new(App) }}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.specs = map[string]*fleetHandle{}
	return nil
}

// fleetHandle is a handler's view of its fleet: nil until the app starts.
type fleetHandle struct {
	spec  engine.Spec
	fleet atomic.Pointer[engine.Fleet]
}

// get returns the running fleet, or nil before the config started.
func (h *fleetHandle) get() *engine.Fleet { return h.fleet.Load() }

// register adds a fleet to be started with the config; handlers with the
// same spec share one.
func (a *App) register(spec engine.Spec) *fleetHandle {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := spec.Key()
	if h, ok := a.specs[key]; ok {
		return h
	}
	h := &fleetHandle{spec: spec}
	a.specs[key] = h
	return h
}

// Start starts (or joins, after a reload) every registered fleet and waits
// until their engines are ready.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, h := range a.specs {
		f, err := a.acquire(key, h.spec)
		if err != nil {
			a.releaseAll()
			return err
		}
		a.held = append(a.held, key)
		h.fleet.Store(f)
	}
	return nil
}

// acquire returns the fleet of spec, starting it if no loaded config has
// it yet.
func (a *App) acquire(key string, spec engine.Spec) (*engine.Fleet, error) {
	val, loaded, err := fleets.LoadOrNew(key, func() (caddy.Destructor, error) {
		return a.startFleet(spec)
	})
	if err != nil {
		return nil, err
	}
	if loaded {
		a.logger.Info("keeping the running engine fleet", zap.String("fleet", key), zap.Int("engines", len(spec.Endpoints)))
	}
	return val.(*runningFleet).Fleet, nil
}

func (a *App) startFleet(spec engine.Spec) (*runningFleet, error) {
	f, err := engine.New(spec, engine.Options{Logger: a.logger.Named("engine")})
	if err != nil {
		return nil, fmt.Errorf("mlc: %w", err)
	}
	begin := time.Now()
	a.logger.Info("starting engine fleet", zap.String("model", spec.Model), zap.String("kind", string(spec.Kind)), zap.Int("engines", len(spec.Endpoints)))
	if err := f.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("mlc: starting engines: %w", err)
	}
	a.logger.Info("engine fleet ready", zap.Duration("took", time.Since(begin).Round(time.Millisecond)))
	return &runningFleet{f}, nil
}

// Stop releases this config's fleets; a fleet stops when no loaded config
// holds it any more.
func (a *App) Stop() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseAll()
	return nil
}

func (a *App) releaseAll() {
	for _, key := range a.held {
		if _, err := fleets.Delete(key); err != nil {
			a.logger.Error("releasing engine fleet", zap.String("fleet", key), zap.Error(err))
		}
	}
	a.held = nil
}

// runningFleet stops its fleet when the usage pool drops it.
type runningFleet struct{ *engine.Fleet }

// Destruct stops the engines.
func (r *runningFleet) Destruct() error { return r.Stop() }

// builtinProgram is the binary that runs built-in engines: this one, whose
// mlc-engine subcommand is registered by this package.
func builtinProgram() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this binary for the built-in engine: %w", err)
	}
	return exe, nil
}

// Interface guards.
var (
	_ caddy.App         = (*App)(nil)
	_ caddy.Provisioner = (*App)(nil)
)
