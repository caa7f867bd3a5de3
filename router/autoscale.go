package router

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
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
	lf  *LiveFleet
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

// ScaleEvent is the autoscaler's last change, as operators see it.
type ScaleEvent struct {
	At        time.Time `json:"at"`
	Direction string    `json:"direction"` // up or down
	Reason    string    `json:"reason"`
	Engine    string    `json:"engine"`
	Error     string    `json:"error,omitempty"`
}

// ScaleStatus is a model's autoscaling in GET /mlc/engines.
type ScaleStatus struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// Target is the size the autoscaler brings the model to: the engines
	// running or starting, less one draining to stop.
	Target int         `json:"target"`
	Ready  int         `json:"ready"`
	Last   *ScaleEvent `json:"last,omitempty"`
}

// SetScale sets the fleet's autoscaling (nil: none, every engine runs).
// Before the fleet starts, only the first Min spawned engines are left to
// start; afterwards the autoscaler moves to the new bounds.
func (lf *LiveFleet) SetScale(c *ScaleConfig) {
	a := lf.scaler.Load()
	if a == nil {
		if c == nil {
			return
		}
		a = &autoscaler{lf: lf, now: time.Now, states: map[int]string{}}
		lf.scaler.Store(a)
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
	return engine.Spawned(a.lf.spec.Endpoints)
}

// autoscale runs the fleet's autoscaler, if it has spawned engines, until
// ctx ends; a reload may give it one later (SetScale).
func (lf *LiveFleet) autoscale(ctx context.Context) {
	if len(engine.Spawned(lf.spec.Endpoints)) == 0 {
		return
	}
	goroutine.Every(ctx, lf.Log(), "autoscaler", func() time.Duration { return lf.scaler.Load().interval() }, func() {
		if a := lf.scaler.Load(); a != nil {
			a.tick(ctx)
		}
	}, nil)
}

// interval is the autoscaler's tick: a quarter of its shortest wait,
// within [20ms, 1s]; 1s without one.
func (a *autoscaler) interval() time.Duration {
	if a == nil {
		return time.Second
	}
	c := a.cfg.Load()
	if c == nil {
		return time.Second
	}
	d := min(c.UpAfter, c.DownAfter, c.Cooldown) / 4
	return min(max(d, 20*time.Millisecond), time.Second)
}

// tick takes one decision and starts its action.
func (a *autoscaler) tick(ctx context.Context) {
	defer goroutine.Recover(a.lf.Log(), "autoscaler tick", nil)
	rs := a.lf.routers()
	if a.acting.Load() || a.lf.draining() || len(rs) == 0 || a.lf.live.rollRunning(rs[0].Model) {
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
	u := a.lf.upstreams[i]
	dir, state, to := "up", ScaleScalingUp, s.size+1
	if d.delta < 0 {
		dir, state, to = "down", ScaleScalingDown, s.size-1
	}
	a.lf.Log().Info("autoscaling "+dir, zap.String("model", model), zap.String("engine", u.addr), zap.String("reason", d.reason),
		zap.Int("from", s.size), zap.Int("to", to), zap.Int("waiting", s.waiting), zap.Int("in_flight", s.inFlight),
		zap.Float64("kv_used", s.kvUsed))
	m := scaleMetricsOf()
	m.decisions.WithLabelValues(model, dir, d.reason).Inc()
	m.target.WithLabelValues(model).Set(float64(to))
	ev := &ScaleEvent{At: a.now(), Direction: dir, Reason: d.reason, Engine: u.addr}
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
			a.lf.Log().Warn("autoscaling "+dir+" failed", zap.String("model", model), zap.String("engine", u.addr), zap.Error(err))
			return
		}
		a.lf.Log().Info("autoscaled "+dir, zap.String("model", model), zap.String("engine", u.addr),
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
	sctx, cancel := context.WithTimeout(ctx, a.lf.spec.Normalize().StartupTimeout)
	defer cancel()
	err := a.lf.StartEngine(sctx, i)
	if err != nil {
		_ = a.lf.StopEngine(i)
		a.setState(i, ScaleScaledDown)
		return err
	}
	a.setState(i, "")
	closeIdleTo(a.lf.upstreams[i])
	a.lf.wake()
	return nil
}

// down drains engine i for the fleet's grace (what still runs then moves,
// exactly, to the others), then stops it.
func (a *autoscaler) down(ctx context.Context, i int) error {
	u := a.lf.upstreams[i]
	grace := time.Duration(a.lf.grace.Load())
	u.Drain(grace)
	if err := u.WaitDrained(ctx, grace); err != nil {
		a.setState(i, "")
		u.undrain()
		return err
	}
	err := a.lf.StopEngine(i)
	a.setState(i, ScaleScaledDown)
	u.undrain() // stopped: out of rotation without a drain
	return err
}

// choose is the engine to start (the first of the order stopped) or to
// stop (the least busy running one, the last in order among equals),
// -1 for none. An engine an operator drained is not stopped, and none is
// stopped that would leave running engines but no generating one in
// rotation.
func (a *autoscaler) choose(delta int, r *Router) int {
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
	gen := r.roles[r.strategy.generatingRole()]
	serves := func(j int) bool { return slices.Contains(gen, j) && !a.lf.upstreams[j].draining() }
	cands := slices.DeleteFunc(slices.Clone(up), func(i int) bool { return a.lf.upstreams[i].draining() })
	slices.Reverse(cands)
	slices.SortStableFunc(cands, func(x, y int) int {
		return int(a.lf.upstreams[x].inflight.Load() - a.lf.upstreams[y].inflight.Load())
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
func (a *autoscaler) pool() int { return len(engine.Spawned(a.lf.spec.Endpoints)) }

// signals reads the fleet's size and load and the routers' queues.
func (a *autoscaler) signals(now time.Time, rs []*Router) scaleSignals {
	var s scaleSignals
	for _, i := range engine.Spawned(a.lf.spec.Endpoints) {
		u := a.lf.upstreams[i]
		if a.running(i) {
			s.size++
		}
		s.inFlight += int(u.inflight.Load())
		l := u.load.Load()
		if ready, _ := u.status(); !ready || l == nil || now.Sub(l.at) > loadStale || l.PagesTotal == 0 {
			continue
		}
		s.kvUsed = max(s.kvUsed, float64(l.PagesTotal-l.PagesFree-l.PagesCached)/float64(l.PagesTotal))
		s.blocked = s.blocked || l.Blocked > 0
	}
	for _, r := range rs {
		s.waiting += r.gate.queue.Stats().Waiting + int(r.queued.Load())
		s.batch = max(s.batch, r.gate.batch)
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

func (a *autoscaler) state(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[i]
}

// status is the autoscaling as operators see it; nil without one.
func (a *autoscaler) status() *ScaleStatus {
	c := a.cfg.Load()
	if c == nil {
		return nil
	}
	st := &ScaleStatus{Min: c.Min, Max: c.Max}
	for _, i := range engine.Spawned(a.lf.spec.Endpoints) {
		if a.running(i) {
			st.Target++
		}
		if ready, _ := a.lf.upstreams[i].status(); ready {
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

// routers are the live routers whose engines are lf's.
func (lf *LiveFleet) routers() []*Router {
	lv := lf.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	var out []*Router
	for r := range lv.routers {
		if r.handle.get() == lf {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y *Router) int { return strings.Compare(x.Model, y.Model) })
	return out
}

// rollRunning reports that a rolling restart of the model runs.
func (lv *Live) rollRunning(model string) bool {
	st, ok := lv.RollOf(model)
	return ok && st.State == "running"
}

// asleep reports that the router's engines are all scaled down by an
// autoscaler of min 0: its next request starts one (readiness: cold).
func asleep(r *Router) bool {
	lf := r.handle.get()
	if lf == nil {
		return false
	}
	a := lf.scaler.Load()
	if a == nil {
		return false
	}
	c := a.cfg.Load()
	return c != nil && c.Min == 0
}

// scaleMetrics are the autoscaler's metrics.
type scaleMetrics struct {
	decisions *prometheus.CounterVec
	target    *prometheus.GaugeVec
}

var (
	scaleMetricsOnce sync.Once
	scaleMetricsVal  *scaleMetrics
)

func scaleMetricsOf() *scaleMetrics {
	scaleMetricsOnce.Do(func() {
		scaleMetricsVal = &scaleMetrics{
			decisions: newCounterVec("scale_decisions_total",
				"The autoscaler's changes of a model's engines, by direction (up, down) and reason.", "model", "direction", "reason"),
			target: newGaugeVec("scale_target", "The number of spawned engines the autoscaler brings a model to.", "model"),
		}
	})
	return scaleMetricsVal
}

// scaleCollectors are the autoscaler's metrics, for RegisterMetrics.
func scaleCollectors() []prometheus.Collector {
	m := scaleMetricsOf()
	return []prometheus.Collector{m.decisions, m.target}
}

// scaleStatusOf is lf's autoscaling, nil for none (or no fleet).
func scaleStatusOf(lf *LiveFleet) *ScaleStatus {
	if lf == nil || lf.scaler.Load() == nil {
		return nil
	}
	return lf.scaler.Load().status()
}

// scaleStateOf is the autoscaler's state of lf's engine i.
func scaleStateOf(lf *LiveFleet, i int) string {
	if a := lf.scaler.Load(); a != nil {
		return a.state(i)
	}
	return ""
}

// cold names the models asleep (see asleep) with no engine ready.
func (m *Models) cold() []string {
	var out []string
	for _, r := range m.routers {
		if asleep(r) && r.readyGenerating() == 0 {
			out = append(out, r.Model)
		}
	}
	return out
}
