package caddymlc

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Scale is the autoscaling of a model's spawned engines: the endpoints it
// lists are the pool, of which between Min and Max run. Only the first
// Min start with the config: in endpoint order, but in disagg the first
// decode engine first (it prefills alone while no prefill engine runs). An engine is added when
// requests wait at the gate or for an engine (or the KV runs short) for
// UpAfter without a break; one is taken away (drained for the drain
// grace, its streams then moving exactly to the others, then stopped)
// when one engine fewer would have done for DownAfter; after each change
// nothing moves for Cooldown. Min 0 lets an idle model sleep: its next
// request waits, up to queue_timeout, while an engine starts. Every
// decision is logged with its reason and counted
// (caddy_mlc_scale_decisions_total); GET /mlc/engines shows the target.
//
// The NVSHMEM world is the pool's at every size: every engine keeps its
// device_id_starts and PEs, an engine stopped is a PE absent. The
// built-in engine's world (over HTTP) works with PEs absent; the engines
// of `engine mlc` (and of a command, which may be MLC) must all join
// their world at start, so in disagg mode, where KV goes through it,
// scale is refused with them; in whole mode their model library must be
// one compiled without disaggregation (MLC joins the world only then).
//
// Caddyfile:
//
//	scale <min> [<max>] {
//	    up_after   <duration>  (default 5s)
//	    down_after <duration>  (default 2m)
//	    cooldown   <duration>  (default 30s)
//	    kv_high    <share>     (KV pages in use that are pressure; default 0.9)
//	}
type Scale struct {
	// Min engines always run (0: none while idle). Required.
	Min int `json:"min"`
	// Max engines run at most; default: every spawned endpoint.
	Max int `json:"max,omitempty"`
	// UpAfter is how long requests must wait (or the KV be short)
	// without a break before an engine is added. Default 5s.
	UpAfter caddy.Duration `json:"up_after,omitempty"`
	// DownAfter is how long one engine fewer must have done before one
	// is drained and stopped. Default 2m.
	DownAfter caddy.Duration `json:"down_after,omitempty"`
	// Cooldown is how long nothing changes after a change, but a cold
	// start. Default 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
	// KVHigh is the share of an engine's KV pages in use that counts as
	// pressure. Default 0.9.
	KVHigh float64 `json:"kv_high,omitempty"`
}

// withDefaults returns a copy of s with its defaults for a pool of pool
// spawned engines; nil stays nil.
func (s *Scale) withDefaults(pool int) *Scale {
	if s == nil {
		return nil
	}
	c := *s
	if c.Max == 0 {
		c.Max = pool
	}
	d := fleet.ScaleConfig{UpAfter: time.Duration(c.UpAfter), DownAfter: time.Duration(c.DownAfter),
		Cooldown: time.Duration(c.Cooldown), KVHigh: c.KVHigh}.WithDefaults()
	c.UpAfter, c.DownAfter, c.Cooldown, c.KVHigh = caddy.Duration(d.UpAfter), caddy.Duration(d.DownAfter), caddy.Duration(d.Cooldown), d.KVHigh
	return &c
}

// config is the router's form of the model's scale option; nil for none.
func (c ModelConfig) scaleConfig() *fleet.ScaleConfig {
	s := c.Scale
	if s == nil {
		return nil
	}
	return &fleet.ScaleConfig{Min: s.Min, Max: s.Max, Order: fleet.ScaleOrder(c.Mode, c.Endpoints),
		UpAfter: time.Duration(s.UpAfter), DownAfter: time.Duration(s.DownAfter), Cooldown: time.Duration(s.Cooldown), KVHigh: s.KVHigh}
}

// validateScale checks the model's scale option against its engines.
func (c ModelConfig) validateScale() error {
	if c.Scale == nil {
		return nil
	}
	pool := len(engine.Spawned(c.Endpoints))
	if pool == 0 {
		return fmt.Errorf("mlc_router: scale: the model has no spawned endpoint to scale (the endpoints listed, not external, are the pool)")
	}
	if err := c.scaleConfig().Validate(pool); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if c.Scale.UpAfter < 0 || c.Scale.DownAfter < 0 || c.Scale.Cooldown < 0 || c.Scale.KVHigh < 0 {
		return fmt.Errorf("mlc_router: scale: durations and kv_high must be positive")
	}
	if k := engine.Kind(c.Engine.Kind); c.Mode == router.ModeDisagg && !k.Driver().Traits().OnCPU {
		return fmt.Errorf("mlc_router: scale with engine %s in disagg mode: the engines join one NVSHMEM world of all the endpoints at start, "+
			"which a partly started pool cannot form, and a world per size would restart every engine at each change; use mode whole, or no scale", k)
	}
	return nil
}

// parseScale reads `scale <min> [<max>] [{ ... }]`.
func parseScale(r *ModelConfig, d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return d.Errf("scale: want <min> [<max>]")
	}
	s := &Scale{}
	for i, dst := range []*int{&s.Min, &s.Max}[:len(args)] {
		n, err := strconv.Atoi(args[i])
		if err != nil || n < 0 || i == 1 && n < 1 {
			return d.Errf("scale %q: want an engine count (min at least 0, max at least 1)", args[i])
		}
		*dst = n
	}
	if s.Max > 0 && s.Min > s.Max {
		return d.Errf("scale %d %d: min is more than max", s.Min, s.Max)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := parseScaleOption(s, d); err != nil {
			return err
		}
	}
	r.Scale = s
	return nil
}

// parseScaleOption reads one line of a scale block.
func parseScaleOption(s *Scale, d *caddyfile.Dispenser) error {
	name := d.Val()
	var v string
	if err := oneArg(d, &v); err != nil {
		return err
	}
	if name == "kv_high" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return d.Errf("scale kv_high %q: want a share of the KV pages in (0, 1]", v)
		}
		s.KVHigh = f
		return nil
	}
	dst := map[string]*caddy.Duration{"up_after": &s.UpAfter, "down_after": &s.DownAfter, "cooldown": &s.Cooldown}[name]
	if dst == nil {
		return d.Errf("scale: unknown option %q (want up_after, down_after, cooldown or kv_high)", name)
	}
	dur, err := positiveDuration(v)
	if err != nil {
		return d.Errf("scale %s %q: want a positive duration", name, v)
	}
	*dst = dur
	return nil
}

// setScale records the autoscaling of the fleet of key, which Start
// gives the fleet (before its engines start, for a new one).
func (a *App) setScale(key string, s *fleet.ScaleConfig) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.scales == nil {
		a.scales = map[string]*fleet.ScaleConfig{}
	}
	a.scales[key] = s
}
