package caddymlc

import (
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// fleets holds the engine fleets of every loaded config, keyed by
// engine.Spec.Key (what defines the processes). On `caddy reload` the new
// config is started before the old one is stopped: a fleet with the same
// key is then found here and kept, processes, load counts and breakers
// alike, instead of a second set of engines racing for the same ports.
var fleets = caddy.NewUsagePool()

// App is the "mlc" Caddy app. mlc_router handlers register their engine
// fleets with it while they are provisioned; the app starts the fleets when
// the config starts, and releases them when it stops. Starting engines in
// the app's Start, not in a handler's Provision, is what keeps
// `caddy validate` and `caddy adapt --validate` from spawning engines: Caddy
// provisions modules to validate a config, but starts apps only to run it.
//
// Caddy starts a config's apps in no fixed order: when the http app starts
// first, requests wait in the routers' queues until the engines are ready.
type App struct {
	// Cluster, when set, shares budgets and prefix indexes with the
	// other replicas of this config through Redis (cluster.go).
	Cluster *Cluster `json:"cluster,omitempty"`

	// Keys is the keys file of every mlc_router that names none (see
	// Auth).
	Keys string `json:"keys,omitempty"`

	ctx     caddy.Context
	logger  *zap.Logger
	mu      sync.Mutex
	handles map[string]*router.Handle     // by spec key
	scales  map[string]*fleet.ScaleConfig // by spec key; absent: every engine runs
	models  []*served                     // in provisioning order
	held    []string                      // keys whose fleets this config holds
	// watching: this config holds the process's descriptor watch.
	watching bool
	// proc is what outlives a reload (live.go); live is what the
	// routers share, and lifecycle their engines' lifecycle, its parts.
	proc      *process
	live      *router.Live
	lifecycle *fleet.Lifecycle
	// cluster is the connection of the Cluster option; nil without it.
	cluster *clusterLink
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "mlc", New: func() caddy.Module { return new(App) }}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.handles = map[string]*router.Handle{}
	a.proc = acquireProcess()
	a.live, a.lifecycle = a.proc.Live, a.proc.lifecycle
	if a.Cluster != nil {
		if err := cluster.RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
			return fmt.Errorf("mlc: metrics: %w", err)
		}
		link, err := provisionCluster(a.Cluster, a.live, a.logger)
		if err != nil {
			return fmt.Errorf("mlc: %w", err)
		}
		a.cluster = link
	}
	return nil
}

// Cleanup lets go of the cluster connection: the last config that held it
// closes it.
func (a *App) Cleanup() error {
	a.cluster.release()
	if a.proc != nil {
		releaseProcess()
	}
	return nil
}

// adopt adds a model of this config: it is started and stopped with it,
// and handed over to its successor after a reload.
func (a *App) adopt(s *served) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.models = append(a.models, s)
}

// register adds a fleet, to be started with the config.
func (a *App) register(spec engine.Spec) *router.Handle {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := spec.Key()
	if h, ok := a.handles[key]; ok {
		return h
	}
	h := router.NewHandle(spec)
	a.handles[key] = h
	return h
}

// Start starts (or, after a reload, joins) every registered fleet and
// waits until their engines are ready.
func (a *App) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkPorts(); err != nil {
		return err
	}
	if a.cluster != nil {
		// Not in Provision: `caddy validate` provisions, and must not
		// connect.
		a.cluster.conn.Start()
		a.cluster.pooled.sharing.SharePrefixes()
		a.cluster.pooled.sharing.ShareSessions()
	}
	grace := a.drainGrace()
	for key, h := range a.handles {
		lf, err := a.acquire(key, h, a.scales[key])
		if err != nil {
			a.releaseAll()
			return err
		}
		a.held = append(a.held, key)
		lf.SetGrace(grace)
		// The fleet logs through the newest config that holds it: a
		// stopped config's log outputs may be closed.
		lf.SetLogger(a.logger.Named("engine"))
		if err := lf.Reconfigure(h.Spec(), lf.Log()); err != nil {
			a.logger.Warn("updating the supervision settings of a kept fleet", zap.Error(err))
		}
		a.lifecycle.Scale(lf, a.scales[key])
		h.Set(lf.Pool())
	}
	holdDescriptorWatch(a.logger)
	a.watching = true
	a.proc.current.Store(a)
	for _, s := range a.models {
		if s.dynamic != nil {
			s.dynamic.Start(grace)
		}
		s.logStart(a.listenAddrs(s.owner))
	}
	return nil
}

// checkPorts refuses a config whose different fleets share an address.
func (a *App) checkPorts() error {
	owner := map[string]string{}
	for key, h := range a.handles {
		for _, ep := range h.Spec().Endpoints {
			if other, ok := owner[ep.Addr()]; ok && other != key {
				return fmt.Errorf("mlc: endpoint %s belongs to two mlc_router blocks with different engines; give them the same engine settings, or other ports", ep.Addr())
			}
			owner[ep.Addr()] = key
		}
	}
	return nil
}

// acquire returns the fleet of h's spec, starting it (with its
// autoscaling, nil for none) if no loaded config has it yet; while it
// starts, the engine list shows it through h.
func (a *App) acquire(key string, h *router.Handle, scale *fleet.ScaleConfig) (*fleet.Fleet, error) {
	spec := h.Spec()
	val, loaded, err := fleets.LoadOrNew(key, func() (caddy.Destructor, error) {
		lf, err := a.lifecycle.NewFleet(spec, a.logger.Named("engine"))
		if err != nil {
			return nil, err
		}
		a.lifecycle.Scale(lf, scale)
		h.Launching(lf.Pool())
		// On a reload (a config runs) a port still taken waits; at the
		// first start it fails, as a port held by another program would.
		if err := lf.Launch(a.proc.current.Load() != nil); err != nil {
			return nil, err
		}
		return pooledFleet{lf}, nil
	})
	if err != nil {
		return nil, err
	}
	if loaded {
		a.logger.Info("keeping the running engines", zap.String("fleet", key), zap.Int("engines", len(spec.Endpoints)))
	}
	return val.(pooledFleet).Fleet, nil
}

// drainGrace is Caddy's grace_period when set, else fleet.DefaultDrainGrace.
func (a *App) drainGrace() time.Duration {
	if app, err := a.ctx.AppIfConfigured("http"); err == nil {
		if h, ok := app.(*caddyhttp.App); ok && h.GracePeriod > 0 {
			return time.Duration(h.GracePeriod)
		}
	}
	return fleet.DefaultDrainGrace
}

// Stop hands this config's routers over to the config that replaced it,
// then releases its fleets: a fleet no config holds any more drains and
// stops (see pooledFleet.Destruct). When Caddy exits, readiness and new
// requests are refused first (see exiting).
func (a *App) Stop() error {
	if caddy.Exiting() {
		a.proc.shuttingDown.Store(true) // before the drain: no new stream starts
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if next := a.proc.current.Load(); next != nil && next != a {
		next.succeed(a.models)
	}
	for _, s := range a.models {
		s.core.Retire()
	}
	a.proc.current.CompareAndSwap(a, nil)
	for _, s := range a.models {
		if s.dynamic != nil {
			s.dynamic.Stop()
		}
	}
	a.releaseAll()
	if a.watching {
		releaseDescriptorWatch()
		a.watching = false
	}
	return nil
}

// succeed makes a's models the successors of old ones: the k-th old
// router of a model is replaced by the k-th new router of that model (or
// the last one). Routers of a model the new config does not serve have no
// successor and keep serving on their engines while those drain.
func (a *App) succeed(old []*served) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]int{}
	for _, o := range old {
		k := seen[o.cfg.Model]
		seen[o.cfg.Model]++
		var same []*served
		for _, s := range a.models {
			if s.cfg.Model == o.cfg.Model {
				same = append(same, s)
			}
		}
		if len(same) == 0 {
			continue
		}
		o.core.HandOver(same[min(k, len(same)-1)].core)
	}
}

func (a *App) releaseAll() {
	for _, key := range a.held {
		if _, err := fleets.Delete(key); err != nil {
			a.logger.Error("releasing engine fleet", zap.String("fleet", key), zap.Error(err))
		}
	}
	a.held = nil
}

// listenAddrs returns the addresses of the http servers whose routes
// hold r, for the start-up log.
func (a *App) listenAddrs(r *Handler) []string {
	app, err := a.ctx.AppIfConfigured("http")
	if err != nil {
		return nil
	}
	h, ok := app.(*caddyhttp.App)
	if !ok {
		return nil
	}
	var out []string
	for _, srv := range h.Servers {
		if routesHold(srv.Routes, r) {
			out = append(out, srv.Listen...)
		}
	}
	return out
}

// routesHold reports whether routes (or their subroutes) hold r.
func routesHold(routes caddyhttp.RouteList, r *Handler) bool {
	for _, route := range routes {
		for _, h := range route.Handlers {
			switch h := h.(type) {
			case *Handler:
				if h == r {
					return true
				}
			case *caddyhttp.Subroute:
				if routesHold(h.Routes, r) {
					return true
				}
			}
		}
	}
	return false
}

// pooledFleet is a fleet in a usage pool: when no config holds it any
// more it drains, then stops its engines (fleet.Retire). During a reload
// that returns at once; when Caddy exits it drains and stops before
// returning, so that no engine outlives Caddy.
type pooledFleet struct{ *fleet.Fleet }

// Destruct drains the fleet and stops its engines.
func (p pooledFleet) Destruct() error {
	fleet.Retire(p.Fleet, caddy.Exiting())
	return nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ caddy.Destructor   = pooledFleet{}
)
