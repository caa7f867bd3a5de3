package fleet

import (
	"fmt"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Defaults of a model's autoscaling (ScaleConfig).
const (
	// DefaultScaleUpAfter: requests waited (or the KV was short) this
	// long without a break before an engine is added.
	DefaultScaleUpAfter = 5 * time.Second
	// DefaultScaleDownAfter: the engines were idle enough to do without
	// one (see scalePlanner) this long before one is drained and stopped.
	DefaultScaleDownAfter = 2 * time.Minute
	// DefaultScaleCooldown: after a change, no other but a cold start
	// (or one back inside min..max) for this long; a new engine's load
	// settles before it is judged.
	DefaultScaleCooldown = 30 * time.Second
	// DefaultScaleKVHigh is the share of an engine's KV pages in use
	// that is pressure.
	DefaultScaleKVHigh = 0.9
)

// ScaleConfig is the autoscaling of a fleet's spawned engines: between
// Min and Max of them run, the first Min of Order at the start.
type ScaleConfig struct {
	Min, Max int
	// Order are the spawned endpoints' indexes in the order they start
	// (see ScaleOrder); nil: endpoint order.
	Order     []int
	UpAfter   time.Duration
	DownAfter time.Duration
	Cooldown  time.Duration
	KVHigh    float64
}

// WithDefaults returns c with its unset durations and KVHigh defaulted.
func (c ScaleConfig) WithDefaults() ScaleConfig {
	if c.UpAfter <= 0 {
		c.UpAfter = DefaultScaleUpAfter
	}
	if c.DownAfter <= 0 {
		c.DownAfter = DefaultScaleDownAfter
	}
	if c.Cooldown <= 0 {
		c.Cooldown = DefaultScaleCooldown
	}
	if c.KVHigh <= 0 {
		c.KVHigh = DefaultScaleKVHigh
	}
	return c
}

// Validate checks c against a pool of pool spawned engines.
func (c ScaleConfig) Validate(pool int) error {
	switch {
	case c.Min < 0 || c.Max < 1 || c.Min > c.Max:
		return fmt.Errorf("scale %d %d: want 0 <= min <= max, max >= 1", c.Min, c.Max)
	case c.Max > pool:
		return fmt.Errorf("scale %d %d: max is more than the %d spawned endpoints, the pool the engines are taken from", c.Min, c.Max, pool)
	case c.KVHigh > 1:
		return fmt.Errorf("scale kv_high %v: want a share of the KV pages in (0, 1]", c.KVHigh)
	}
	return nil
}

// ScaleOrder is the order a mode's spawned endpoints start in: the first
// that generates (a decode engine in disagg, which prefills alone while
// no prefill engine runs), then the others in endpoint order. The last
// to start is the first to stop.
func ScaleOrder(mode string, eps []engine.Endpoint) []int {
	var out []int
	for _, i := range router.GeneratingEndpoints(mode, eps) {
		if !eps[i].External {
			out = append(out, i)
			break
		}
	}
	for _, i := range engine.Spawned(eps) {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// Why an engine was added or taken away (caddy_mlc_scale_decisions_total's
// reason).
const (
	scaleBelowMin  = "below_min"   // fewer than min run (a start, a reload that raised min)
	scaleAboveMax  = "above_max"   // more than max run (a reload that lowered max)
	scaleColdStart = "cold_start"  // none runs and a request waits
	scaleQueue     = "queue"       // requests waited for up_after
	scaleKV        = "kv_pressure" // the KV was short for up_after
	scaleIdle      = "idle"        // one engine fewer would have done for down_after
	scaleOff       = "scale_off"   // a reload took the scale option away: every engine runs
)

// scaleSignals are what the autoscaler reads of a fleet at a tick.
type scaleSignals struct {
	size     int // spawned engines running or starting
	waiting  int // requests waiting: in the gate's queue or for an engine
	inFlight int // calls on the engines
	batch    int // each engine's batch (the gate's); 0: unknown
	// kvUsed is the highest share of KV pages in use among the engines
	// that report it; blocked says one had work it could not start for
	// want of pages.
	kvUsed  float64
	blocked bool
}

// scaleDecision is a step of the fleet's size: +1, -1 or 0, and why.
type scaleDecision struct {
	delta  int
	reason string
}

// scalePlanner decides, tick by tick, whether a fleet needs an engine
// more or fewer. It keeps no clock: each tick says what time it is, so a
// test drives it with a fake one. Hysteresis: pressure and idleness are
// apart (any wait against an in-flight count that fits in half the
// batch of one engine fewer), each must last (UpAfter, DownAfter), and
// after a change nothing moves for Cooldown but a cold start or a size
// outside min..max.
type scalePlanner struct {
	cfg           ScaleConfig
	pressureSince time.Time // zero: no pressure now
	idleSince     time.Time // zero: not idle now
	lastChange    time.Time
}

// decide is the step at now, given s.
func (p *scalePlanner) decide(now time.Time, s scaleSignals) scaleDecision {
	switch {
	case s.size < p.cfg.Min:
		return scaleDecision{+1, scaleBelowMin}
	case s.size > p.cfg.Max:
		return scaleDecision{-1, scaleAboveMax}
	case s.size == 0 && s.waiting > 0:
		return scaleDecision{+1, scaleColdStart}
	}
	reason := p.pressure(s)
	idle := reason == "" && s.waiting == 0 && fitsOneFewer(s)
	p.pressureSince = since(p.pressureSince, reason != "", now)
	p.idleSince = since(p.idleSince, idle, now)
	cooled := now.Sub(p.lastChange) >= p.cfg.Cooldown
	switch {
	case reason != "" && s.size < p.cfg.Max && cooled && now.Sub(p.pressureSince) >= p.cfg.UpAfter:
		return scaleDecision{+1, reason}
	case idle && s.size > p.cfg.Min && cooled && now.Sub(p.idleSince) >= p.cfg.DownAfter:
		return scaleDecision{-1, scaleIdle}
	}
	return scaleDecision{}
}

// changed records a change of size at now: what led to it starts over.
func (p *scalePlanner) changed(now time.Time) {
	p.lastChange, p.pressureSince, p.idleSince = now, time.Time{}, time.Time{}
}

// pressure names what asks for one more engine, "" for nothing.
func (p *scalePlanner) pressure(s scaleSignals) string {
	switch {
	case s.waiting > 0:
		return scaleQueue
	case s.blocked || s.kvUsed >= p.cfg.KVHigh:
		return scaleKV
	}
	return ""
}

// fitsOneFewer says that one engine fewer would do: none in flight for
// the last engine, else at most half the batch of each remaining one
// (none in flight when the batch is unknown).
func fitsOneFewer(s scaleSignals) bool {
	if s.size <= 1 || s.batch <= 0 {
		return s.inFlight == 0
	}
	return s.inFlight*2 <= (s.size-1)*s.batch
}

// since is when a condition began: start while on, kept; zero when off.
func since(start time.Time, on bool, now time.Time) time.Time {
	switch {
	case !on:
		return time.Time{}
	case start.IsZero():
		return now
	}
	return start
}
