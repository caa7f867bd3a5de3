package caddymlc

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// policyNamespace is the Caddy module namespace of selection policies:
// `policy <name> [args...]` in a Caddyfile loads the module of that name
// (its caddyfile.Unmarshaler, if it has one, reads the arguments), and the
// JSON form is the module under "policy" with its name inline
// ({"policy": "least_loaded"}). A module of it implements router.Policy,
// and may be a caddy.Provisioner, a caddy.Validator and a router.Observer
// too.
const policyNamespace = "http.handlers.mlc_router.selection_policies"

// LeastLoadedSelection is the least_loaded selection policy module
// (router.LeastLoaded), the default.
type LeastLoadedSelection struct{ router.LeastLoaded }

// PrefixAwareSelection is the prefix_aware selection policy module
// (router.PrefixAware).
type PrefixAwareSelection struct{ router.PrefixAware }

// RoundRobinSelection is the round_robin selection policy module
// (router.RoundRobin): engines in turn, whatever their load.
type RoundRobinSelection struct{ router.RoundRobin }

// SLOAwareSelection is the slo_aware selection policy module
// (router.SLOAware): for a request with latency targets, an engine
// predicted to meet them (see router.SLOAware); least_loaded's choice for
// one without.
type SLOAwareSelection struct{ router.SLOAware }

// CaddyModule returns the Caddy module information.
func (SLOAwareSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: policyNamespace + ".slo_aware", New: func() caddy.Module { return new(SLOAwareSelection) }}
}

// UnmarshalCaddyfile reads `policy slo_aware`, which takes no arguments.
func (*SLOAwareSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noPolicyArgs(d) }

// CaddyModule returns the Caddy module information.
func (LeastLoadedSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: policyNamespace + ".least_loaded", New: func() caddy.Module { return new(LeastLoadedSelection) }}
}

// CaddyModule returns the Caddy module information.
func (PrefixAwareSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: policyNamespace + ".prefix_aware", New: func() caddy.Module { return new(PrefixAwareSelection) }}
}

// CaddyModule returns the Caddy module information.
func (RoundRobinSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: policyNamespace + ".round_robin", New: func() caddy.Module { return new(RoundRobinSelection) }}
}

// UnmarshalCaddyfile reads `policy least_loaded`, which takes no
// arguments.
func (*LeastLoadedSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noPolicyArgs(d) }

// UnmarshalCaddyfile reads `policy prefix_aware`, which takes no
// arguments.
func (*PrefixAwareSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noPolicyArgs(d) }

// UnmarshalCaddyfile reads `policy round_robin`, which takes no
// arguments.
func (*RoundRobinSelection) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return noPolicyArgs(d) }

// noPolicyArgs reads the Caddyfile of a policy without arguments: its
// name alone.
func noPolicyArgs(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// loadPolicy loads the policy module of raw (in the struct of field
// field), least_loaded for none.
func loadPolicy(ctx caddy.Context, structPtr any, field string, raw json.RawMessage) (router.Policy, error) {
	if raw == nil {
		return new(LeastLoadedSelection), nil
	}
	mod, err := ctx.LoadModule(structPtr, field)
	if err != nil {
		return nil, fmt.Errorf("mlc_router: loading the selection policy: %w", err)
	}
	p, ok := mod.(router.Policy)
	if !ok {
		return nil, fmt.Errorf("mlc_router: module %T is not a selection policy", mod)
	}
	return p, nil
}

// policyName is the policy's module name (least_loaded, p2c), as the
// config names it; "" for a policy that is not a Caddy module.
func policyName(p router.Policy) string {
	if m, ok := p.(caddy.Module); ok {
		return m.CaddyModule().ID.Name()
	}
	return ""
}

// modulePolicy returns raw in the module form: a bare policy name, as
// configs wrote it before policies were modules, becomes the module of
// that name, and an empty one (or null) the default.
func modulePolicy(raw json.RawMessage) json.RawMessage {
	var name string
	switch {
	case json.Unmarshal(raw, &name) != nil:
		return raw
	case name == "":
		return nil
	}
	return caddyconfig.JSONModuleObject(struct{}{}, "policy", name, nil)
}

// Interface guards.
var (
	_ router.Policy         = (*LeastLoadedSelection)(nil)
	_ router.Policy         = (*PrefixAwareSelection)(nil)
	_ router.Policy         = (*RoundRobinSelection)(nil)
	_ router.PrefixReader   = (*PrefixAwareSelection)(nil)
	_ router.Policy         = (*SLOAwareSelection)(nil)
	_ router.LatencyReader  = (*SLOAwareSelection)(nil)
	_ caddyfile.Unmarshaler = (*SLOAwareSelection)(nil)
	_ caddyfile.Unmarshaler = (*LeastLoadedSelection)(nil)
	_ caddyfile.Unmarshaler = (*PrefixAwareSelection)(nil)
	_ caddyfile.Unmarshaler = (*RoundRobinSelection)(nil)
)
