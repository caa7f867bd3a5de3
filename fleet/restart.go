package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router"
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
func (lc *Lifecycle) RestartModel(model string, grace time.Duration) (RollStatus, error) {
	engines := lc.modelEngines(model)
	if len(engines) == 0 {
		return RollStatus{}, fmt.Errorf("%w: %s", ErrNoModel, model)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if st := lc.rolls[model]; st != nil && st.State == "running" {
		return *st, fmt.Errorf("%w: %s", ErrRolling, model)
	}
	st := &RollStatus{Model: model, State: "running", Started: time.Now(), Restarted: []string{}}
	for _, u := range engines {
		st.Engines = append(st.Engines, u.Addr())
	}
	lc.rolls[model] = st
	log := engines[0].Pool().Log()
	log.Info("rolling restart", zap.String("model", model), zap.Strings("engines", st.Engines))
	plan := *st
	goroutine.Go(log, "rolling restart", func() {
		err := lc.rollingRestart(context.Background(), engines, grace, func(current string, restarted bool) {
			lc.mu.Lock()
			defer lc.mu.Unlock()
			st.Current = current
			if restarted {
				st.Restarted = append(st.Restarted, current)
				st.Current = ""
			}
		})
		lc.endRoll(st, err)
		if err != nil {
			log.Error("rolling restart stopped", zap.String("model", model), zap.Error(err))
			return
		}
		log.Info("rolling restart done", zap.String("model", model), zap.Duration("took", time.Since(st.Started).Round(time.Millisecond)))
	}, func(p any) { lc.endRoll(st, fmt.Errorf("panic: %v", p)) })
	return plan, nil
}

// endRoll records the end of a rolling restart.
func (lc *Lifecycle) endRoll(st *RollStatus, err error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	st.State, st.Ended = "done", time.Now()
	if err != nil {
		st.State, st.Error = "failed", err.Error()
	}
}

// RollOf returns the last rolling restart of the model.
func (lc *Lifecycle) RollOf(model string) (RollStatus, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	st := lc.rolls[model]
	if st == nil {
		return RollStatus{}, false
	}
	out := *st
	out.Engines, out.Restarted = slices.Clone(st.Engines), slices.Clone(st.Restarted)
	return out, true
}

// rollRunning reports that a rolling restart of the model runs.
func (lc *Lifecycle) rollRunning(model string) bool {
	st, ok := lc.RollOf(model)
	return ok && st.State == "running"
}

// modelEngines returns the spawned engines of the fleets that serve the
// model (not those of a fleet a reload replaced), in fleet order.
func (lc *Lifecycle) modelEngines(model string) []*router.Upstream {
	var out []*router.Upstream
	for _, r := range lc.routers.Routers() {
		if r.Model != model {
			continue
		}
		for _, u := range spawnedOf(r) {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *router.Upstream) int {
		if a.Pool() != b.Pool() {
			return strings.Compare(a.Addr(), b.Addr())
		}
		return a.Index() - b.Index()
	})
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
func (lc *Lifecycle) rollingRestart(ctx context.Context, engines []*router.Upstream, grace time.Duration, progress func(addr string, restarted bool)) error {
	for _, u := range engines {
		progress(u.Addr(), false)
		if err := lc.restart(ctx, u, grace); err != nil {
			return err
		}
		progress(u.Addr(), true)
	}
	return nil
}

// restart drains the engine u for grace (its fleet's when negative),
// restarts its process and puts it back in rotation.
func (lc *Lifecycle) restart(ctx context.Context, u *router.Upstream, grace time.Duration) error {
	lf := Of(u.Pool())
	if grace < 0 {
		grace = lf.Grace()
	}
	lf.Drain(u.Index(), grace)
	defer lf.Undrain(u.Index())
	if err := lf.WaitDrained(ctx, u.Index(), grace); err != nil {
		return fmt.Errorf("engine %s did not drain: %w", u.Addr(), err)
	}
	spec := lf.Spec().Normalize()
	rctx, cancel := context.WithTimeout(ctx, spec.StopGrace+spec.StartupTimeout)
	defer cancel()
	if err := lf.Restart(rctx, u.Index()); err != nil {
		return err
	}
	lc.closeIdleTo(u)
	return nil
}

// spawnedOf are the engines of r's fleet that it runs itself (not those
// its autoscaler stopped); none while its fleet drains after a reload.
func spawnedOf(r *router.Router) []*router.Upstream {
	if f := Of(r.Pool()); f != nil {
		return f.spawned()
	}
	return nil
}
