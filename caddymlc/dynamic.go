package caddymlc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// DynamicEngines are engines found while Caddy runs, by reverse_proxy's
// own upstream sources (http.reverse_proxy.upstreams.a, .srv, .multi...),
// so that a Kubernetes headless Service works for mlc_router as it does
// for reverse_proxy's `dynamic`. One source per role: a source without a
// role serves any. Dynamic engines are external: the router never spawns
// them. They come and go without a reload (fleet.Discovery): one that
// appears is used once it answers its health checks; one that disappears
// is drained: its streams finish there within the drain grace (Caddy's
// grace_period, else 30s), then move, exactly, to the others.
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

// dynamicFleets holds one single-engine fleet per discovered address,
// shared by every router and config that finds it.
var dynamicFleets = caddy.NewUsagePool()

// provisionDynamic loads the model's dynamic sources.
func (s *served) provisionDynamic(ctx caddy.Context) error {
	r := &s.cfg
	if r.Dynamic == nil {
		return nil
	}
	sources := map[string]fleet.Source{}
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
		sources[src.role] = upstreamSource(mod.(reverseproxy.UpstreamSource))
		if r.Dynamic.loaded == nil {
			r.Dynamic.loaded = map[string]bool{}
		}
		r.Dynamic.loaded[src.role] = true
	}
	s.dynamic = fleet.NewDiscovery(s.live, sources, dynamicPool{s}, s.logger)
	return nil
}

// upstreamSource asks src for its engines' addresses.
func upstreamSource(src reverseproxy.UpstreamSource) fleet.Source {
	return func(ctx context.Context) ([]string, error) {
		ups, err := src.GetUpstreams(discoveryRequest(ctx))
		addrs := make([]string, 0, len(ups))
		for _, u := range ups {
			addrs = append(addrs, u.Dial)
		}
		return addrs, err
	}
}

// discoveryRequest is the request the upstream sources are asked with:
// they read placeholders from its replacer.
func discoveryRequest(ctx context.Context) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	return req.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer()))
}

// dynamicPool is a model's discovered engines in dynamicFleets.
type dynamicPool struct{ s *served }

// Acquire returns the watched engine at addr, starting to watch it if no
// router does yet.
func (p dynamicPool) Acquire(addr string) (*fleet.Fleet, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	spec := engine.Spec{Model: p.s.cfg.Path, Kind: engine.Kind(p.s.cfg.Engine.Kind),
		Endpoints: []engine.Endpoint{{Host: host, Port: port, GPUs: 1, External: true}}}.Normalize()
	val, _, err := dynamicFleets.LoadOrNew("mlc-dynamic-"+addr, func() (caddy.Destructor, error) {
		lf, err := p.s.lifecycle.NewFleet(spec, p.s.logger.Named("engine"))
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
	return val.(pooledFleet).Fleet, nil
}

// Release lets go of the engine at addr.
func (p dynamicPool) Release(addr string) error {
	_, err := dynamicFleets.Delete("mlc-dynamic-" + addr)
	return err
}
