package fleet

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/router"
)

// ErrNoEngine is returned for an address that no live router uses.
var ErrNoEngine = errors.New("no engine at that address")

// enginesAt returns the engines at addr that the live routers use: one,
// or, in the moment of a reload, one per fleet that has it.
func (lc *Lifecycle) enginesAt(addr string) []*router.Upstream {
	var out []*router.Upstream
	for _, r := range lc.routers.Routers() {
		for _, u := range r.Engines() {
			if u.Addr() == addr && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// DrainEngine drains the engine at addr (router.Upstream.Drain) for
// grace, or, when grace is negative, for its fleet's drain grace
// (Caddy's grace_period, else router.DefaultDrainGrace).
func (lc *Lifecycle) DrainEngine(addr string, grace time.Duration) error {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	for _, u := range us {
		g := grace
		if g < 0 {
			g = u.Fleet().Grace()
		}
		u.Drain(g)
	}
	return nil
}

// UndrainEngine puts the engine at addr back in rotation.
func (lc *Lifecycle) UndrainEngine(addr string) error {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	for _, u := range us {
		u.Undrain()
	}
	return nil
}

// EngineDrainState is the drain state of the engine at addr: "",
// router.DrainDraining or router.DrainDrained.
func (lc *Lifecycle) EngineDrainState(addr string) (string, error) {
	us := lc.enginesAt(addr)
	if len(us) == 0 {
		return "", fmt.Errorf("%w: %s", ErrNoEngine, addr)
	}
	st := ""
	for _, u := range us {
		if s := u.DrainState(); s == router.DrainDraining || st == "" {
			st = s
		}
	}
	return st, nil
}
