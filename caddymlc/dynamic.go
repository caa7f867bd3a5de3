package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// DynamicEngines are engines found while Caddy runs, by reverse_proxy's
// own upstream sources (http.reverse_proxy.upstreams.a, .srv, .multi...),
// so that a Kubernetes headless Service works for mlc_router as it does
// for reverse_proxy's `dynamic`. One source per role: a source without a
// role serves any. Dynamic engines are external: the router never spawns
// them. They come and go without a reload: one that appears is used once
// it answers its health checks; one that disappears is drained (see
// dynamicSet.leave): its streams finish there within the drain grace
// (Caddy's grace_period, else 30s), then move, exactly, to the others.
//
// In disagg mode the router learns each engine's first NVSHMEM PE (the
// recv_rank of a remote_send to it) from the engine itself (the built-in
// engine reports pe_start in query_engine_metrics); an engine that does
// not report it still serves, but always prefills its own requests.
type DynamicEngines struct {
	// Any is the source of engines that prefill and decode.
	AnyRaw json.RawMessage `json:"any,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`
	// Prefill is the source of prefill engines (disagg mode).
	PrefillRaw json.RawMessage `json:"prefill,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`
	// Decode is the source of decode engines (disagg mode).
	DecodeRaw json.RawMessage `json:"decode,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`

	// loaded holds the roles whose source was loaded: loading a module
	// clears its raw JSON.
	loaded map[string]bool
}

// has reports whether a source serves role.
func (d *DynamicEngines) has(role string) bool {
	if d == nil {
		return false
	}
	anyRole := d.AnyRaw != nil || d.loaded[""]
	prefill := d.PrefillRaw != nil || d.loaded[engine.RolePrefill]
	decode := d.DecodeRaw != nil || d.loaded[engine.RoleDecode]
	switch role {
	case engine.RolePrefill:
		return anyRole || prefill
	case engine.RoleDecode:
		return anyRole || decode
	}
	return anyRole || prefill || decode
}

// dynamicRefresh is how often the sources are asked; they cache their own
// answers for their own refresh interval.
const dynamicRefresh = 500 * time.Millisecond

// dynamicFleets holds one single-engine fleet per discovered address,
// shared by every router and config that finds it.
var dynamicFleets = caddy.NewUsagePool()

// dynamicSet is a router's discovered engines.
type dynamicSet struct {
	r       *served
	sources map[string]reverseproxy.UpstreamSource        // by role, "" for any
	engines atomic.Pointer[map[string][]*router.Upstream] // by role asked: "", prefill, decode

	mu     sync.Mutex
	held   map[string]*router.LiveFleet // by address
	gone   map[string]*router.LiveFleet // left the source, draining (dyndrain.go)
	grace  time.Duration                // the drain grace of a gone engine
	cancel context.CancelFunc
	done   chan struct{}
}

// provisionDynamic loads the model's dynamic sources.
func (s *served) provisionDynamic(ctx caddy.Context) error {
	r := &s.cfg
	if r.Dynamic == nil {
		return nil
	}
	d := &dynamicSet{r: s, sources: map[string]reverseproxy.UpstreamSource{},
		held: map[string]*router.LiveFleet{}, gone: map[string]*router.LiveFleet{}}
	for _, src := range []struct {
		role, field string
		raw         json.RawMessage
	}{{"", "AnyRaw", r.Dynamic.AnyRaw}, {engine.RolePrefill, "PrefillRaw", r.Dynamic.PrefillRaw}, {engine.RoleDecode, "DecodeRaw", r.Dynamic.DecodeRaw}} {
		if src.raw == nil {
			continue
		}
		mod, err := ctx.LoadModule(r.Dynamic, src.field)
		if err != nil {
			return fmt.Errorf("mlc_router: loading the dynamic %s engines: %w", router.RoleName(src.role), err)
		}
		d.sources[src.role] = mod.(reverseproxy.UpstreamSource)
		if r.Dynamic.loaded == nil {
			r.Dynamic.loaded = map[string]bool{}
		}
		r.Dynamic.loaded[src.role] = true
	}
	d.engines.Store(&map[string][]*router.Upstream{})
	s.dynamic = d
	return nil
}

// Engines returns the discovered engines that may serve role.
func (d *dynamicSet) Engines(role string) []*router.Upstream { return (*d.engines.Load())[role] }

// start finds the engines now, then keeps looking until stop; an engine
// that leaves drains for grace.
func (d *dynamicSet) start(grace time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done, d.grace = cancel, make(chan struct{}), grace
	d.refresh(ctx)
	goroutine.Every(ctx, d.r.logger, "dynamic engine discovery", func() time.Duration { return dynamicRefresh },
		func() { d.refresh(ctx) }, func() { close(d.done) })
}

// stop ends the discovery and lets go of the engines; an engine no
// router holds any more drains and stops being watched.
func (d *dynamicSet) stop() {
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
func (d *dynamicSet) refresh(ctx context.Context) {
	defer goroutine.Recover(d.r.logger, "dynamic engine discovery", nil)
	roles := map[string][]string{} // address -> roles
	for role, src := range d.sources {
		ups, err := src.GetUpstreams(discoveryRequest(ctx))
		if err != nil {
			// Keep what was found: a resolver's hiccup is no reason to
			// drop every engine.
			d.r.logger.Warn("finding dynamic engines", zap.String("role", router.RoleName(role)), zap.Error(err))
			return
		}
		for _, u := range ups {
			roles[u.Dial] = append(roles[u.Dial], role)
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
			if lf, err = d.acquire(addr); err != nil {
				d.r.logger.Error("dynamic engine", zap.String("engine", addr), zap.Error(err))
				continue
			}
			lf.SetGrace(d.grace)
			d.held[addr] = lf
			d.r.logger.Info("dynamic engine found", zap.String("engine", addr), zap.Strings("roles", router.RoleNames(rs)))
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
		d.r.live.EnginesChanged()
	}
}

// acquire returns the watched engine at addr, starting to watch it if no
// router does yet.
func (d *dynamicSet) acquire(addr string) (*router.LiveFleet, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	spec := engine.Spec{Model: d.r.cfg.Path, Kind: engine.Kind(d.r.cfg.Engine.Kind),
		Endpoints: []engine.Endpoint{{Host: host, Port: port, GPUs: 1, External: true}}}.Normalize()
	val, _, err := dynamicFleets.LoadOrNew("mlc-dynamic-"+addr, func() (caddy.Destructor, error) {
		lf, err := router.NewLiveFleet(d.r.live, spec, d.r.logger.Named("engine"))
		if err != nil {
			return nil, err
		}
		lf.ForgetPEs()
		if err := lf.LaunchNow(); err != nil {
			return nil, err
		}
		return pooledFleet{lf}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(pooledFleet).LiveFleet, nil
}

// release lets go of the engine at addr; the caller holds d.mu.
func (d *dynamicSet) release(addr string) {
	delete(d.held, addr)
	if _, err := dynamicFleets.Delete("mlc-dynamic-" + addr); err != nil {
		d.r.logger.Error("releasing a dynamic engine", zap.String("engine", addr), zap.Error(err))
	}
}

// discoveryRequest is the request the upstream sources are asked with:
// they read placeholders from its replacer.
func discoveryRequest(ctx context.Context) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	return req.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer()))
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
