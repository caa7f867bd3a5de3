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

// An autoscaled engine's state, as /mlc/engines shows it (EngineStatus.Scale).
const (
	ScaleScaledDown  = "scaled down"  // stopped by the autoscaler, in the pool
	ScaleScalingUp   = "scaling up"   // starting
	ScaleScalingDown = "scaling down" // draining, then stopped
)

// autoscaler runs a fleet's ScaleConfig: at every tick it reads the
// fleet's signals, asks its planner, and adds an engine (Fleet.StartEngine)
// or takes one away (a drain, then Fleet.StopEngine), one at a time.
type autoscaler struct {
	lc  *Lifecycle
	lf  *Fleet
	cfg atomic.Pointer[ScaleConfig] // nil: off, every engine runs
	now func() time.Time
	// acting: a start or a drain and stop runs; the planner waits for it.
	acting atomic.Bool

	mu      sync.Mutex
	planner scalePlanner
	states  map[int]string // by endpoint index; absent: running as usual
	last    *ScaleEvent
	// failedAt is when the last change failed: none is tried again, not
	// even a cold start, for a cool-down (an engine that cannot start
	// is not started in a loop).
	failedAt time.Time
}

var _ Scaler = (*autoscaler)(nil)

// Scale sets lf's autoscaling (nil: none, every engine runs). Before the
// fleet starts, only the first Min spawned engines are left to start;
// afterwards the autoscaler moves to the new bounds.
func (lc *Lifecycle) Scale(lf *Fleet, c *ScaleConfig) {
	a, _ := lf.Scaler().(*autoscaler)
	if a == nil {
		if c == nil {
			return
		}
		a = &autoscaler{lc: lc, lf: lf, now: time.Now, states: map[int]string{}}
		lf.SetScaler(a)
	}
	a.cfg.Store(c)
	select {
	case <-lf.Launched():
		return
	default:
	}
	if c == nil {
		return
	}
	for n, i := range a.order() {
		if n >= c.Min {
			_ = lf.StopEngine(i) // before Start: only marks it
			a.setState(i, ScaleScaledDown)
		}
	}
}

// order are the spawned endpoints in the order they start.
func (a *autoscaler) order() []int {
	if c := a.cfg.Load(); c != nil && c.Order != nil {
		return c.Order
	}
	return engine.Spawned(a.lf.Spec().Endpoints)
}

// Interval is the autoscaler's tick: a quarter of its shortest wait,
// within [20ms, 1s]; 1s without one.
func (a *autoscaler) Interval() time.Duration {
	c := a.cfg.Load()
	if c == nil {
		return time.Second
	}
	d := min(c.UpAfter, c.DownAfter, c.Cooldown) / 4
	return min(max(d, 20*time.Millisecond), time.Second)
}

// Tick takes one decision and starts its action.
func (a *autoscaler) Tick(ctx context.Context) {
	defer goroutine.Recover(a.lf.Log(), "autoscaler tick", nil)
	rs := a.lc.fleetRouters(a.lf)
	if a.acting.Load() || a.lf.Retired() || len(rs) == 0 || a.lc.rollRunning(rs[0].Model) {
		return
	}
	now := a.now()
	s := a.signals(now, rs)
	cfg := a.cfg.Load()
	a.mu.Lock()
	var d scaleDecision
	switch {
	case !a.failedAt.IsZero() && now.Sub(a.failedAt) < failedCooldown(cfg):
		// a failed change cools down first
	case cfg == nil && s.size < a.pool():
		d = scaleDecision{+1, scaleOff}
	case cfg != nil:
		a.planner.cfg = *cfg
		d = a.planner.decide(now, s)
	}
	if d.delta != 0 {
		a.planner.changed(now)
	}
	a.mu.Unlock()
	if d.delta == 0 {
		return
	}
	i := a.choose(d.delta, rs[0])
	if i < 0 {
		return
	}
	a.act(ctx, rs[0].Model, i, d, s)
}

// act starts the decision's action on engine i, in the background.
func (a *autoscaler) act(ctx context.Context, model string, i int, d scaleDecision, s scaleSignals) {
	u := a.lf.Upstreams()[i]
	dir, state, to := "up", ScaleScalingUp, s.size+1
	if d.delta < 0 {
		dir, state, to = "down", ScaleScalingDown, s.size-1
	}
	a.lf.Log().Info("autoscaling "+dir, zap.String("model", model), zap.String("engine", u.Addr()), zap.String("reason", d.reason),
		zap.Int("from", s.size), zap.Int("to", to), zap.Int("waiting", s.waiting), zap.Int("in_flight", s.inFlight),
		zap.Float64("kv_used", s.kvUsed))
	m := scaleMetricsOf()
	m.decisions.WithLabelValues(model, dir, d.reason).Inc()
	m.target.WithLabelValues(model).Set(float64(to))
	ev := &ScaleEvent{At: a.now(), Direction: dir, Reason: d.reason, Engine: u.Addr()}
	a.mu.Lock()
	a.states[i], a.last = state, ev
	a.mu.Unlock()
	a.acting.Store(true)
	goroutine.Go(a.lf.Log(), "autoscaler action", func() {
		defer a.acting.Store(false)
		begin := time.Now()
		var err error
		if d.delta > 0 {
			err = a.up(ctx, i)
		} else {
			err = a.down(ctx, i)
		}
		a.mu.Lock()
		a.planner.changed(a.now()) // the cool-down runs from the change's end
		a.failedAt = time.Time{}
		if err != nil {
			ev.Error, a.failedAt = err.Error(), a.now()
		}
		a.mu.Unlock()
		if err != nil {
			a.lf.Log().Warn("autoscaling "+dir+" failed", zap.String("model", model), zap.String("engine", u.Addr()), zap.Error(err))
			return
		}
		a.lf.Log().Info("autoscaled "+dir, zap.String("model", model), zap.String("engine", u.Addr()),
			zap.Duration("took", time.Since(begin).Round(time.Millisecond)))
	}, func(any) { a.acting.Store(false) })
}

// failedCooldown is the wait after a failed change: the cool-down, or
// DefaultScaleCooldown without a config.
func failedCooldown(c *ScaleConfig) time.Duration {
	if c == nil {
		return DefaultScaleCooldown
	}
	return c.Cooldown
}

// up starts engine i and waits until it is ready; one that does not
// start is stopped again.
func (a *autoscaler) up(ctx context.Context, i int) error {
	sctx, cancel := context.WithTimeout(ctx, a.lf.Spec().Normalize().StartupTimeout)
	defer cancel()
	err := a.lf.StartEngine(sctx, i)
	if err != nil {
		_ = a.lf.StopEngine(i)
		a.setState(i, ScaleScaledDown)
		return err
	}
	a.setState(i, "")
	a.lc.closeIdleTo(a.lf.Upstreams()[i])
	a.lf.Wake()
	return nil
}

// down drains engine i for the fleet's grace (what still runs then moves,
// exactly, to the others), then stops it.
func (a *autoscaler) down(ctx context.Context, i int) error {
	grace := a.lf.Grace()
	a.lf.Drain(i, grace)
	if err := a.lf.WaitDrained(ctx, i, grace); err != nil {
		a.setState(i, "")
		a.lf.undrain(i)
		return err
	}
	err := a.lf.StopEngine(i)
	a.setState(i, ScaleScaledDown)
	a.lf.undrain(i) // stopped: out of rotation without a drain
	return err
}

// choose is the engine to start (the first of the order stopped) or to
// stop (the least busy running one, the last in order among equals),
// -1 for none. An engine an operator drained is not stopped, and none is
// stopped that would leave running engines but no generating one in
// rotation.
func (a *autoscaler) choose(delta int, r *router.Router) int {
	order := a.order()
	var up []int
	for _, i := range order {
		if a.running(i) {
			up = append(up, i)
		} else if delta > 0 {
			return i
		}
	}
	if delta > 0 {
		return -1
	}
	us := a.lf.Upstreams()
	gen := r.Demand().Generating
	serves := func(j int) bool { return slices.Contains(gen, j) && !us[j].OutOfRotation() }
	cands := slices.DeleteFunc(slices.Clone(up), func(i int) bool { return us[i].OutOfRotation() })
	slices.Reverse(cands)
	slices.SortStableFunc(cands, func(x, y int) int {
		return int(us[x].InFlight() - us[y].InFlight())
	})
	for _, i := range cands {
		rest := slices.DeleteFunc(slices.Clone(up), func(j int) bool { return j == i })
		if len(rest) == 0 || slices.ContainsFunc(rest, serves) {
			return i
		}
	}
	return -1
}

// running reports that engine i is in the fleet's size: running or
// starting, not stopped nor draining to stop.
func (a *autoscaler) running(i int) bool {
	return !a.lf.Parked(i) && a.state(i) != ScaleScalingDown
}

// pool is the number of spawned engines.
func (a *autoscaler) pool() int { return len(engine.Spawned(a.lf.Spec().Endpoints)) }

// signals reads the fleet's size and load and the routers' queues.
func (a *autoscaler) signals(now time.Time, rs []*router.Router) scaleSignals {
	var s scaleSignals
	for _, i := range engine.Spawned(a.lf.Spec().Endpoints) {
		u := a.lf.Upstreams()[i]
		if a.running(i) {
			s.size++
		}
		s.inFlight += int(u.InFlight())
		used, blocked, ok := u.KVUse(now)
		if !ok {
			continue
		}
		s.kvUsed = max(s.kvUsed, used)
		s.blocked = s.blocked || blocked
	}
	for _, r := range rs {
		d := r.Demand()
		s.waiting += d.Waiting
		s.batch = max(s.batch, d.Batch)
	}
	return s
}

func (a *autoscaler) setState(i int, st string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st == "" {
		delete(a.states, i)
		return
	}
	a.states[i] = st
}

// EngineState is the autoscaler's hold on engine i (ScaleScaledDown,
// ScaleScalingUp, ScaleScalingDown), "" for none.
func (a *autoscaler) EngineState(i int) string { return a.state(i) }

func (a *autoscaler) state(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[i]
}

// Status is the autoscaling as operators see it; nil without one.
func (a *autoscaler) Status() *ScaleStatus {
	c := a.cfg.Load()
	if c == nil {
		return nil
	}
	st := &ScaleStatus{Min: c.Min, Max: c.Max}
	for _, i := range engine.Spawned(a.lf.Spec().Endpoints) {
		if a.running(i) {
			st.Target++
		}
		if a.lf.Upstreams()[i].Ready() {
			st.Ready++
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil {
		ev := *a.last
		st.Last = &ev
	}
	return st
}

// Asleep reports that the autoscaler may stop every engine (min 0): the
// model's next request starts one.
func (a *autoscaler) Asleep() bool {
	c := a.cfg.Load()
	return c != nil && c.Min == 0
}
