package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// Errors of RestartModel.
var (
	ErrNoModel = errors.New("no spawned engine serves the model")
	ErrRolling = errors.New("a rolling restart of the model is already running")
)

// RollStatus is a rolling restart of a model's engines, as operators see
// it (GET /mlc/models/{model}/restart).
type RollStatus struct {
	Model string `json:"model"`
	// State is running, done or failed.
	State string `json:"state"`
	// Engines are the engines to restart, in order; Restarted those done.
	Engines   []string  `json:"engines"`
	Restarted []string  `json:"restarted"`
	Current   string    `json:"current,omitempty"`
	Error     string    `json:"error,omitempty"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
}

// RestartModel starts, in the background, a rolling restart of the
// spawned engines of the model (see rollingRestart): grace is each
// engine's drain grace, a negative one its fleet's. It returns the plan;
// RollOf follows it.
func (lv *Live) RestartModel(model string, grace time.Duration) (RollStatus, error) {
	engines := lv.modelEngines(model)
	if len(engines) == 0 {
		return RollStatus{}, fmt.Errorf("%w: %s", ErrNoModel, model)
	}
	lv.rollMu.Lock()
	defer lv.rollMu.Unlock()
	if st := lv.rolls[model]; st != nil && st.State == "running" {
		return *st, fmt.Errorf("%w: %s", ErrRolling, model)
	}
	st := &RollStatus{Model: model, State: "running", Started: time.Now(), Restarted: []string{}}
	for _, u := range engines {
		st.Engines = append(st.Engines, u.addr)
	}
	lv.rolls[model] = st
	log := engines[0].fleet.Log()
	log.Info("rolling restart", zap.String("model", model), zap.Strings("engines", st.Engines))
	plan := *st
	goroutine.Go(log, "rolling restart", func() {
		err := rollingRestart(context.Background(), engines, grace, func(current string, restarted bool) {
			lv.rollMu.Lock()
			defer lv.rollMu.Unlock()
			st.Current = current
			if restarted {
				st.Restarted = append(st.Restarted, current)
				st.Current = ""
			}
		})
		lv.endRoll(st, err)
		if err != nil {
			log.Error("rolling restart stopped", zap.String("model", model), zap.Error(err))
			return
		}
		log.Info("rolling restart done", zap.String("model", model), zap.Duration("took", time.Since(st.Started).Round(time.Millisecond)))
	}, func(p any) { lv.endRoll(st, fmt.Errorf("panic: %v", p)) })
	return plan, nil
}

// endRoll records the end of a rolling restart.
func (lv *Live) endRoll(st *RollStatus, err error) {
	lv.rollMu.Lock()
	defer lv.rollMu.Unlock()
	st.State, st.Ended = "done", time.Now()
	if err != nil {
		st.State, st.Error = "failed", err.Error()
	}
}

// RollOf returns the last rolling restart of the model.
func (lv *Live) RollOf(model string) (RollStatus, bool) {
	lv.rollMu.Lock()
	defer lv.rollMu.Unlock()
	st := lv.rolls[model]
	if st == nil {
		return RollStatus{}, false
	}
	out := *st
	out.Engines, out.Restarted = slices.Clone(st.Engines), slices.Clone(st.Restarted)
	return out, true
}

// modelEngines returns the spawned engines of the fleets that serve the
// model (not those of a fleet a reload replaced), in fleet order.
func (lv *Live) modelEngines(model string) []*Upstream {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	var out []*Upstream
	for r := range lv.routers {
		if r.Model != model {
			continue
		}
		for _, u := range r.spawnedEngines() {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *Upstream) int {
		if a.fleet != b.fleet {
			return compareAddr(a, b)
		}
		return a.index - b.index
	})
	return out
}

// compareAddr orders engines of different fleets by address.
func compareAddr(a, b *Upstream) int {
	switch {
	case a.addr < b.addr:
		return -1
	case a.addr > b.addr:
		return 1
	}
	return 0
}

// spawnedEngines are the engines of the router's fleet that it runs
// itself (not those its autoscaler stopped); none while its fleet drains
// after a reload.
func (r *Router) spawnedEngines() []*Upstream {
	lf := r.handle.get()
	if lf == nil || lf.draining() {
		return nil
	}
	var out []*Upstream
	for _, i := range engine.Spawned(lf.spec.Endpoints) {
		if !lf.Parked(i) {
			out = append(out, lf.upstreams[i])
		}
	}
	return out
}

// rollingRestart restarts the engines one at a time: each is drained for
// grace (its streams finish there, or then move to the others, exactly),
// restarted once nothing runs on it (engine.Fleet.Restart: same command
// line and world), back in rotation once ready; then the next. progress
// hears of each engine as it starts and once it is restarted. It stops
// at the first engine that does not drain or come back, which is put
// back in rotation all the same (the router takes it when it is ready):
// no second engine goes down while one is not back.
func rollingRestart(ctx context.Context, engines []*Upstream, grace time.Duration, progress func(addr string, restarted bool)) error {
	for _, u := range engines {
		progress(u.addr, false)
		if err := u.restart(ctx, grace); err != nil {
			return err
		}
		progress(u.addr, true)
	}
	return nil
}

// restart drains the engine for grace (its fleet's when negative),
// restarts its process and puts it back in rotation.
func (u *Upstream) restart(ctx context.Context, grace time.Duration) error {
	if grace < 0 {
		grace = time.Duration(u.fleet.grace.Load())
	}
	u.Drain(grace)
	defer u.Undrain()
	if err := u.WaitDrained(ctx, grace); err != nil {
		return fmt.Errorf("engine %s did not drain: %w", u.addr, err)
	}
	spec := u.fleet.spec.Normalize()
	rctx, cancel := context.WithTimeout(ctx, spec.StopGrace+spec.StartupTimeout)
	defer cancel()
	if err := u.fleet.Restart(rctx, u.index); err != nil {
		return err
	}
	closeIdleTo(u)
	return nil
}

// closeIdleTo drops the routers' idle connections, after the engine u
// restarted: they went to its old process.
func closeIdleTo(u *Upstream) {
	lv := u.fleet.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	for r := range lv.routers {
		if slices.Contains(r.candidates(""), u) {
			r.client.close()
		}
	}
}
