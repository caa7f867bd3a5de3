package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// DefaultDrainGrace bounds how long the engines of a fleet that no config
// uses any more keep serving the streams they have, when Caddy's
// grace_period is not set: long enough for most completions to end where
// they run; a stream still running after it is resumed on the new engines
// (exactly, as after a preemption), so a short grace costs a second
// prefill, never a dropped request.
const DefaultDrainGrace = 30 * time.Second

// LiveFleet is a fleet of engines and what the routers know of them. The
// mlc app keeps it in the fleets UsagePool, shared by every config that
// has the same engines: a reload that keeps the engines keeps it, with
// its counts and breakers. When no config holds it any more it drains:
// new work goes to the engines of the config that replaced it, the streams
// it has finish, and then (or after the grace period) its engines stop.
type LiveFleet struct {
	*engine.Fleet
	spec      engine.Spec
	upstreams []*Upstream

	logger   atomic.Pointer[zap.Logger]
	grace    atomic.Int64 // drain grace, nanoseconds
	inflight atomic.Int64
	idle     notifier // notified when inflight drops to 0

	draining atomic.Bool
	started  chan struct{} // closed once the engines were started (or failed to)
	startErr error         // valid after started
	done     chan struct{} // closed once the engines are stopped
	cancel   context.CancelFunc
}

// NewLiveFleet makes the fleet of spec, its engines not started yet.
func NewLiveFleet(spec engine.Spec, log *zap.Logger) (*LiveFleet, error) {
	f, err := engine.New(spec, engine.Options{Logger: log,
		OnStateChange: func(int, engine.State, engine.State) { engineChanges.notify() }})
	if err != nil {
		return nil, fmt.Errorf("mlc: %w", err)
	}
	lf := &LiveFleet{Fleet: f, spec: spec, started: make(chan struct{}), done: make(chan struct{})}
	lf.logger.Store(log)
	lf.grace.Store(int64(DefaultDrainGrace))
	starts := spec.DeviceIDStarts()
	for i, ep := range spec.Endpoints {
		u := &Upstream{fleet: lf, index: i, addr: ep.Addr(), url: ep.URL()}
		u.pe.Store(int64(starts[i]))
		lf.upstreams = append(lf.upstreams, u)
	}
	return lf, nil
}

// Log is the fleet's logger: the newest config's that holds it.
func (lf *LiveFleet) Log() *zap.Logger { return lf.logger.Load() }

// engineChanges wakes the requests that wait for an engine: an engine's
// state changed, a fleet was attached or drains, a breaker opened, a
// router was handed over, dynamic engines came or went. One notifier for
// all: a wake-up is cheap, a missed one is a stall.
var engineChanges notifier

// wake tells the routers waiting for an engine to look again.
func (lf *LiveFleet) wake() { engineChanges.notify() }

// held counts calls in flight on the whole fleet, for the drain.
func (lf *LiveFleet) held(delta int64) {
	if lf.inflight.Add(delta) == 0 {
		lf.idle.notify()
	}
}

// Launch starts the engines and waits until they are ready. Fleets whose
// ports are held by the engines of another fleet that is draining wait
// for those to stop first: that is a reload that changed the engines on
// the same ports. It does not block then; routers queue requests until
// the new engines are ready.
func (lf *LiveFleet) Launch(reload bool) error {
	old := runningOn(lf.spec)
	register(lf)
	if len(old) == 0 && (!reload || lf.spec.CheckPorts() == nil) {
		return lf.LaunchNow()
	}
	if len(old) > 0 {
		lf.Log().Info("the new engines wait for the old engines on their ports to drain and stop",
			zap.Strings("ports", sharedAddrs(lf.spec, old)))
	}
	goroutine.Go(lf.Log(), "deferred engine start", func() {
		for _, o := range old {
			<-o.done
		}
		if reload {
			lf.waitPorts()
		}
		if lf.draining.Load() { // replaced before it could start
			lf.abandon(errDraining)
			return
		}
		if err := lf.LaunchNow(); err != nil {
			lf.Log().Error("starting the new engines after the old ones stopped", zap.Error(err))
		}
	}, func(p any) { lf.abandon(fmt.Errorf("panic starting engines: %v", p)) })
	return nil
}

// waitPorts waits, up to the startup timeout, until the ports of the
// fleet's engines are free. On a reload a port may still be taken for a
// moment after the old engines stopped (a process that is still exiting,
// or a connection of the machine's that the kernel gave that port): the
// reload is not refused for it, its requests wait in the queue, and a port
// still taken at the end fails the start with ErrPortInUse, logged.
func (lf *LiveFleet) waitPorts() {
	deadline := time.Now().Add(lf.spec.StartupTimeout)
	logged := false
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 500 * time.Millisecond}
	for !lf.draining.Load() && time.Now().Before(deadline) {
		err := lf.spec.CheckPorts()
		if !errors.Is(err, engine.ErrPortInUse) {
			return
		}
		if !logged {
			lf.Log().Info("the new engines wait for their ports to be free", zap.Error(err))
			logged = true
		}
		time.Sleep(b.Next()) // polling a port another process holds: nothing to wait on
	}
}

// LaunchNow starts the engines and waits until they are ready.
func (lf *LiveFleet) LaunchNow() error {
	begin := time.Now()
	lf.Log().Info("starting engine fleet", zap.String("model", lf.spec.Model),
		zap.String("kind", string(lf.spec.Kind)), zap.Int("engines", len(lf.spec.Endpoints)))
	if err := lf.Fleet.Start(context.Background()); err != nil {
		err = fmt.Errorf("mlc: starting engines: %w", err)
		lf.abandon(err)
		return err
	}
	lf.Log().Info("engine fleet ready", zap.Duration("took", time.Since(begin).Round(time.Millisecond)))
	ctx, cancel := context.WithCancel(context.Background())
	lf.cancel = cancel
	lf.pollLoad(ctx)
	lf.pollGPUs(ctx)
	close(lf.started)
	lf.wake()
	return nil
}

// abandon ends a fleet whose engines never ran.
func (lf *LiveFleet) abandon(err error) {
	lf.startErr = err
	unregister(lf)
	close(lf.started)
	close(lf.done)
	lf.wake()
}

// failed returns the error of a start that failed, or nil.
func (lf *LiveFleet) failed() error {
	select {
	case <-lf.started:
		return lf.startErr
	default:
		return nil
	}
}

// Drain is called when no config holds the fleet any more: it drains,
// then stops the engines. During a reload it returns at once and drains
// in the background, so that neither the old config's stop nor the new
// config's requests wait for it; when the process exits (exiting) it
// drains and stops before returning, so that no engine outlives it.
func (lf *LiveFleet) Drain(exiting bool) {
	lf.draining.Store(true)
	lf.wake()
	if exiting {
		lf.drainAndStop()
		return
	}
	goroutine.Go(lf.Log(), "engine fleet drain", lf.drainAndStop, func(any) { lf.stop() })
}

// SetLogger makes log the fleet's logger: the newest config's (a stopped
// config's log outputs may be closed).
func (lf *LiveFleet) SetLogger(log *zap.Logger) { lf.logger.Store(log) }

// SetGrace sets how long the fleet's engines may drain.
func (lf *LiveFleet) SetGrace(d time.Duration) { lf.grace.Store(int64(d)) }

// Upstreams are the fleet's engines as the routers see them, in endpoint
// order.
func (lf *LiveFleet) Upstreams() []*Upstream { return lf.upstreams }

// Spec is what the fleet runs.
func (lf *LiveFleet) Spec() engine.Spec { return lf.spec }

// Handle is the routers' way to their fleet: empty until the config
// starts (or for a router with only discovered engines). Routers with the
// same engines share one.
type Handle struct {
	spec engine.Spec
	lf   atomic.Pointer[LiveFleet]
}

// NewHandle returns an empty handle for the fleet of spec.
func NewHandle(spec engine.Spec) *Handle { return &Handle{spec: spec} }

// Spec is the fleet's spec.
func (h *Handle) Spec() engine.Spec { return h.spec }

// Set attaches the running fleet.
func (h *Handle) Set(f *LiveFleet) {
	h.lf.Store(f)
	engineChanges.notify()
}

// get returns the fleet, or nil before the config started.
func (h *Handle) get() *LiveFleet { return h.lf.Load() }

func (lf *LiveFleet) drainAndStop() {
	grace := time.Duration(lf.grace.Load())
	if n := lf.inflight.Load(); n > 0 {
		lf.Log().Info("draining engines before stopping them", zap.Int64("in_flight", n), zap.Duration("grace", grace))
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for drained := false; !drained; {
		idle := lf.idle.wait()
		if lf.inflight.Load() <= 0 {
			break
		}
		select {
		case <-idle:
		case <-deadline.C:
			lf.Log().Warn("drain grace period over: stopping the engines under live streams, which resume on the new engines",
				zap.Int64("in_flight", lf.inflight.Load()))
			drained = true
		}
	}
	lf.stop()
}

func (lf *LiveFleet) stop() {
	<-lf.started
	if lf.startErr != nil {
		return // nothing runs; done is closed
	}
	if lf.cancel != nil {
		lf.cancel()
	}
	_ = lf.Fleet.Stop()
	unregister(lf)
	close(lf.done)
}

// running holds the fleets whose engines run (or start), to find the
// ports a new fleet must wait for.
var running struct {
	sync.Mutex
	fleets map[*LiveFleet]bool
}

func register(lf *LiveFleet) {
	running.Lock()
	defer running.Unlock()
	if running.fleets == nil {
		running.fleets = map[*LiveFleet]bool{}
	}
	running.fleets[lf] = true
}

func unregister(lf *LiveFleet) {
	running.Lock()
	defer running.Unlock()
	delete(running.fleets, lf)
}

// runningOn returns the running fleets of other specs that have an
// endpoint on one of spec's addresses.
func runningOn(spec engine.Spec) []*LiveFleet {
	running.Lock()
	defer running.Unlock()
	var out []*LiveFleet
	for lf := range running.fleets {
		if lf.spec.Key() != spec.Key() && len(sharedAddrs(spec, []*LiveFleet{lf})) > 0 {
			out = append(out, lf)
		}
	}
	return out
}

// sharedAddrs returns spec's spawned endpoint addresses that one of the
// fleets also has.
func sharedAddrs(spec engine.Spec, fleets []*LiveFleet) []string {
	var out []string
	for _, ep := range spec.Endpoints {
		for _, lf := range fleets {
			if !ep.External && slices.ContainsFunc(lf.spec.Endpoints, func(o engine.Endpoint) bool { return o.Addr() == ep.Addr() }) {
				out = append(out, ep.Addr())
				break
			}
		}
	}
	return out
}

// errDraining is returned to an attempt whose router's engines drain: it
// goes to the router that replaced it.
var errDraining = errors.New("engines draining after a reload")

// EnginesChanged wakes the requests that wait for an engine: something
// outside the router changed what they may find (a config started).
func EnginesChanged() { engineChanges.notify() }

// ForgetPEs marks the first NVSHMEM PE of the fleet's engines unknown
// until they report it: engines a dynamic source found.
func (lf *LiveFleet) ForgetPEs() {
	for _, u := range lf.upstreams {
		u.pe.Store(-1)
	}
}
