package mlccheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// fleets are the engine fleets --start started.
type fleets struct {
	log     *zap.Logger
	started []*engine.Fleet
}

// startFleets starts the engines of every router, as the mlc app does:
// one fleet per distinct set of engines (two routers over the same
// engines share it), each waited for until every engine is ready. On an
// error what was started is stopped. External endpoints are not started.
func startFleets(ctx context.Context, routers []*handler, log *zap.Logger) (*fleets, error) {
	fl := &fleets{log: log}
	seen := map[string]bool{}
	owner := map[string]string{} // spawned address -> the router whose fleet has it
	for _, r := range routers {
		if len(r.cfg.Endpoints) == 0 {
			continue
		}
		spec, err := r.cfg.FleetSpec()
		if err != nil {
			fl.stop()
			return nil, fmt.Errorf("mlc_router at %s: %w", r.name(), err)
		}
		if seen[spec.Key()] {
			continue
		}
		seen[spec.Key()] = true
		for _, ep := range spec.Endpoints {
			if o, ok := owner[ep.Addr()]; ok && !ep.External {
				fl.stop()
				return nil, fmt.Errorf("mlc_router at %s: engine %s is also an engine of the router at %s, with other settings: one of them cannot start", r.name(), ep.Addr(), o)
			}
			if !ep.External {
				owner[ep.Addr()] = r.name()
			}
		}
		if err := spec.CheckPorts(); err != nil {
			fl.stop()
			if errors.Is(err, engine.ErrPortInUse) {
				return nil, fmt.Errorf("mlc_router at %s: %w (are its engines running already? check them without --start)", r.name(), err)
			}
			return nil, fmt.Errorf("mlc_router at %s: %w", r.name(), err)
		}
		f, err := engine.New(spec, engine.Options{Logger: log})
		if err != nil {
			fl.stop()
			return nil, fmt.Errorf("mlc_router at %s: %w", r.name(), err)
		}
		fl.started = append(fl.started, f)
		log.Info("starting engines", zap.String("router", r.name()),
			zap.String("kind", string(spec.Kind)), zap.Int("engines", len(spec.Endpoints)))
		if err := f.Start(ctx); err != nil {
			fl.stop()
			return nil, fmt.Errorf("mlc_router at %s: starting its engines: %w", r.name(), err)
		}
	}
	return fl, nil
}

// stop stops every engine that was started, and waits until they are
// gone.
func (fl *fleets) stop() {
	if fl == nil {
		return
	}
	for _, f := range fl.started {
		_ = f.Stop()
	}
	fl.started = nil
}

// waitEngines waits, up to wait, until every engine of the routers answers
// GET /v1/models; it returns the engines that do not by then (their
// models check fails).
func waitEngines(ctx context.Context, routers []*handler, wait time.Duration, c *http.Client) []string {
	deadline := time.Now().Add(wait)
	pending := map[string]bool{}
	for _, r := range routers {
		for i := range r.cfg.Endpoints {
			pending[r.url(i)] = true
		}
	}
	for {
		for url := range pending {
			if engine.Probe(ctx, c, url, min(2*time.Second, max(time.Until(deadline), time.Millisecond))) == nil {
				delete(pending, url)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // polling engines that are not up: nothing to wait on
		}
	}
	var left []string
	for url := range pending {
		left = append(left, url)
	}
	return left
}
