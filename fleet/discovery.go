package fleet

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Source lists the addresses (host:port) of the engines a discovery
// source finds now (the adapter's: reverse_proxy's upstream sources).
type Source func(ctx context.Context) ([]string, error)

// EnginePool holds the watched single-engine fleet of each discovered
// address, shared by every router that finds it (the adapter's: Caddy's
// usage pool, so that it outlives a reload).
type EnginePool interface {
	// Acquire returns the fleet of the engine at addr, watching it if
	// no router does yet.
	Acquire(addr string) (*Fleet, error)
	// Release lets go of it: the last holder stops watching it.
	Release(addr string) error
}

// DiscoveryRefresh is how often the sources are asked; they cache their
// own answers for their own refresh interval.
const DiscoveryRefresh = 500 * time.Millisecond

// Discovery is a router's discovered engines (its router.Discovered):
// its sources asked every DiscoveryRefresh, and the engines reconciled
// with their answers. An engine that appears is used once it answers its
// health checks; one that disappears is drained (departed.go).
type Discovery struct {
	live    *router.Live
	log     *zap.Logger
	sources map[string]Source                             // by role, "" for any
	pool    EnginePool                                    // the engines' fleets
	engines atomic.Pointer[map[string][]*router.Upstream] // by role asked: "", prefill, decode

	mu     sync.Mutex
	held   map[string]*Fleet // by address
	gone   map[string]*Fleet // left the source, draining (departed.go)
	grace  time.Duration     // the drain grace of a gone engine
	cancel context.CancelFunc
	done   chan struct{}
}

// NewDiscovery is the engines that sources (by role, "" for any) find,
// held in pool, for routers of live.
func NewDiscovery(live *router.Live, sources map[string]Source, pool EnginePool, log *zap.Logger) *Discovery {
	d := &Discovery{live: live, log: log, sources: sources, pool: pool,
		held: map[string]*Fleet{}, gone: map[string]*Fleet{}}
	d.engines.Store(&map[string][]*router.Upstream{})
	return d
}

// Engines returns the discovered engines that may serve role.
func (d *Discovery) Engines(role string) []*router.Upstream { return (*d.engines.Load())[role] }

// Start finds the engines now, then keeps looking until Stop; an engine
// that leaves drains for grace.
func (d *Discovery) Start(grace time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done, d.grace = cancel, make(chan struct{}), grace
	d.refresh(ctx)
	goroutine.Every(ctx, d.log, "dynamic engine discovery", func() time.Duration { return DiscoveryRefresh },
		func() { d.refresh(ctx) }, func() { close(d.done) })
}

// Stop ends the discovery and lets go of the engines; an engine no
// router holds any more drains and stops being watched.
func (d *Discovery) Stop() {
	if d.cancel == nil {
		return
	}
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	for addr := range d.held {
		d.release(addr)
	}
	for addr := range d.gone {
		delete(d.gone, addr)
		d.release(addr)
	}
	d.engines.Store(&map[string][]*router.Upstream{})
}

// refresh asks every source and reconciles the engines with its answers.
func (d *Discovery) refresh(ctx context.Context) {
	defer goroutine.Recover(d.log, "dynamic engine discovery", nil)
	roles := map[string][]string{} // address -> roles
	for role, src := range d.sources {
		addrs, err := src(ctx)
		if err != nil {
			// Keep what was found: a resolver's hiccup is no reason to
			// drop every engine.
			d.log.Warn("finding dynamic engines", zap.String("role", router.RoleName(role)), zap.Error(err))
			return
		}
		for _, addr := range addrs {
			roles[addr] = append(roles[addr], role)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for addr := range d.held {
		if _, ok := roles[addr]; !ok {
			d.leave(ctx, addr)
			changed = true
		}
	}
	byRole := map[string][]*router.Upstream{}
	for addr, rs := range roles {
		lf := d.held[addr]
		if lf == nil {
			lf = d.comeBack(addr)
		}
		if lf == nil {
			var err error
			if lf, err = d.pool.Acquire(addr); err != nil {
				d.log.Error("dynamic engine", zap.String("engine", addr), zap.Error(err))
				continue
			}
			lf.SetGrace(d.grace)
			d.held[addr] = lf
			d.log.Info("dynamic engine found", zap.String("engine", addr), zap.Strings("roles", router.RoleNames(rs)))
			changed = true
		}
		u := lf.Upstreams()[0]
		byRole[""] = append(byRole[""], u)
		for _, asked := range []string{engine.RolePrefill, engine.RoleDecode} {
			if slices.Contains(rs, asked) || slices.Contains(rs, "") {
				byRole[asked] = append(byRole[asked], u)
			}
		}
	}
	d.keepGone(byRole)
	if old := *d.engines.Load(); changed || !sameEngines(old, byRole) {
		d.engines.Store(&byRole)
		d.live.EnginesChanged()
	}
}

// release lets go of the engine at addr; the caller holds d.mu.
func (d *Discovery) release(addr string) {
	delete(d.held, addr)
	if err := d.pool.Release(addr); err != nil {
		d.log.Error("releasing a dynamic engine", zap.String("engine", addr), zap.Error(err))
	}
}

func sameEngines(a, b map[string][]*router.Upstream) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w := b[k]
		if len(v) != len(w) {
			return false
		}
		for _, u := range v {
			if !slices.Contains(w, u) {
				return false
			}
		}
	}
	return true
}
