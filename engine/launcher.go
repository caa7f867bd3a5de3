package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// launcher starts a fleet's engines, supervises their processes and stops
// them: what the fleet holds while its processes run (the spawner, the
// NVSHMEM uid source, the goroutines' wait group) and whether it started
// or stopped. The Fleet's Start, Stop and StartEngine are its; the Fleet
// keeps the engines' states, configuration and deferred launch.
type launcher struct {
	f *Fleet // whose engines it runs

	ctx    context.Context // canceled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // start and the engine goroutines

	mu      sync.Mutex
	stopped bool
	begun   bool // start ran: StartEngine launches, no longer only unparks

	startOnce sync.Once
	startErr  error
	stopOnce  sync.Once

	// Set by run, read by stop after wg.Wait.
	sp  *spawner
	uid UIDSource
}

// init makes l the launcher of f, not started yet.
func (l *launcher) init(f *Fleet) {
	l.f = f
	l.ctx, l.cancel = context.WithCancel(context.Background())
}

// start is Fleet.Start: the first call runs, the others wait for its
// result; a start that fails stops the fleet.
func (l *launcher) start(ctx context.Context) error {
	l.startOnce.Do(func() {
		l.startErr = l.run(ctx)
		if l.startErr != nil {
			l.stop()
		}
	})
	return l.startErr
}

// stop is Fleet.Stop: once, it cancels the supervision, waits for every
// goroutine (the processes gone), then stops the uid source and the
// spawner.
func (l *launcher) stop() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.stopped = true
		l.mu.Unlock()
		l.cancel()
		l.wg.Wait()
		if l.uid != nil {
			if err := l.uid.Close(); err != nil {
				l.f.logger().Warn("stopping NVSHMEM uid source", zap.Error(err))
			}
		}
		if l.sp != nil {
			l.sp.close()
		}
		l.f.client.CloseIdleConnections()
		l.f.logger().Info("engine fleet stopped")
	})
}

// run is start's body. It holds a wg count so that stop waits for it.
func (l *launcher) run(ctx context.Context) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	l.begun = true
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()

	t0 := time.Now()
	sctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if err := l.prepare(sctx); err != nil {
		return err
	}
	if err := l.launchAll(sctx); err != nil {
		return err
	}
	l.f.logger().Info("engine fleet started", zap.Int("spawned", l.spawned()), zap.Int("left_stopped", l.f.parked()),
		zap.Int("external", len(l.f.engines)-l.spawned()),
		zap.Int(l.deviceWord(), l.f.spec.DeviceIDStarts()[len(l.f.engines)]),
		zap.Stringer("took", time.Since(t0).Round(time.Millisecond)))
	return nil
}

// deviceWord names what the endpoints' "gpus" count: NVSHMEM PEs for the
// builtin engine, which runs on the CPU, GPUs for the others.
func (l *launcher) deviceWord() string {
	if l.f.spec.Kind.Driver().Traits().OnCPU {
		return "pes"
	}
	return "gpus"
}

// launchAll starts one goroutine per engine and waits until every spawned
// engine is ready, or the first failure. Parked engines (StopEngine before
// Start) are left stopped.
func (l *launcher) launchAll(sctx context.Context) error {
	results := make(chan error, len(l.f.engines))
	launched := 0
	for _, e := range l.f.engines {
		if e.ep.External {
			l.wg.Go(func() { e.runExternal(l.ctx) })
			continue
		}
		e.life.mu.Lock()
		if !e.life.parked {
			l.supervise(e, sctx, results)
			launched++
		}
		e.life.mu.Unlock()
	}
	for range launched {
		if err := <-results; err != nil {
			return fmt.Errorf("starting engine fleet: %w", err)
		}
	}
	return nil
}

// spawned returns the number of engines the fleet runs itself.
func (l *launcher) spawned() int { return len(Spawned(l.f.spec.Endpoints)) }

// prepare checks the GPUs, gets the world's NVSHMEM uid and computes every
// spawned engine's command line and environment.
func (l *launcher) prepare(ctx context.Context) error {
	if !l.f.spec.spawnsAny() {
		return nil
	}
	if err := l.checkGPUs(); err != nil {
		return err
	}
	l.sp = newSpawner(l.f.logger)
	l.uid = l.uidSource()
	uctx, cancel := context.WithTimeout(ctx, l.f.settings().StartupTimeout)
	defer cancel()
	uid, err := l.uid.UID(uctx)
	if err != nil {
		return fmt.Errorf("NVSHMEM uid: %w", err)
	}
	for _, e := range l.f.engines {
		if err := e.prepare(uid); err != nil {
			return err
		}
	}
	return nil
}

// uidSource returns Options.UIDSource or the source Spec.UID names.
func (l *launcher) uidSource() UIDSource {
	switch {
	case l.f.opts.UIDSource != nil:
		return l.f.opts.UIDSource
	case l.f.spec.UID == UIDNVSHMEM:
		python := l.f.spec.Kind.Driver().NVSHMEMPython(l.f.spec)
		return &NVSHMEMHelper{Python: python, Grace: l.f.settings().StopGrace, logs: l.f.logger}
	default:
		return RandomUID{}
	}
}

// checkGPUs logs this machine's GPUs (index, name, memory) and refuses a
// spec that needs more GPUs than there are. Only engines whose kind uses
// GPUs are checked (mlc): builtin engines run on the CPU, and a command
// may run anything. Without NVML it logs once and lets the engines find
// out.
func (l *launcher) checkGPUs() error {
	if !l.f.spec.Kind.Driver().Traits().UsesGPUs {
		return nil
	}
	inventory := l.f.opts.Inventory
	if inventory == nil {
		inventory = Inventory
	}
	gpus, err := inventory(l.f.logger())
	if errors.Is(err, ErrNoNVML) {
		l.f.logger().Warn("cannot check the GPUs of this machine", zap.Error(err))
		return nil
	}
	if err != nil {
		return err
	}
	return enoughGPUs(len(gpus), l.f.spec.LocalGPUsNeeded())
}

// readyLog logs that engine i became ready.
func (l *launcher) readyLog(i int, took time.Duration) {
	ep := l.f.engines[i].ep
	l.f.logger().Info(fmt.Sprintf("engine %d/%d %s ready", i+1, len(l.f.engines), ep.Addr()),
		zap.Stringer("took", took.Round(time.Millisecond)))
}

// supervise runs engine e's goroutine (see engine.run) under a
// context of its own, which StopEngine cancels. The caller holds e.life.mu
// and a count of l.wg. It returns the supervision's context.
func (l *launcher) supervise(e *engine, startCtx context.Context, initial chan<- error) context.Context {
	ctx, cancel := context.WithCancel(l.ctx)
	done := make(chan struct{})
	e.life.cancel, e.life.done = cancel, done
	l.wg.Go(func() {
		defer close(done)
		defer cancel()
		e.run(startCtx, ctx, initial)
	})
	return ctx
}

// startEngine starts spawned engine e again after StopEngine, with the
// command line, environment and NVSHMEM world it always has, and returns
// once it is ready (at once if it runs and is ready). A start that fails
// or outlives ctx leaves it stopped, with an error. Before Start, it only
// unmarks it: Start starts it with the others.
func (l *launcher) startEngine(ctx context.Context, e *engine) error {
	e.life.mu.Lock()
	e.life.parked = false
	l.mu.Lock()
	stopped, begun := l.stopped, l.begun
	if !stopped {
		l.wg.Add(1) // Stop waits for this start
		defer l.wg.Done()
	}
	l.mu.Unlock()
	switch {
	case stopped:
		e.life.mu.Unlock()
		return ErrStopped
	case !begun:
		e.life.mu.Unlock()
		return nil
	case e.life.running():
		e.life.mu.Unlock()
		return l.f.readyAgain(ctx, e, 0)
	}
	sctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	initial := make(chan error, 1)
	e.logger().Info("starting engine on request")
	ectx := l.supervise(e, sctx, initial)
	defer context.AfterFunc(ectx, cancel)() // a StopEngine abandons the start
	e.life.mu.Unlock()
	if err := <-initial; err != nil {
		return fmt.Errorf("starting engine %s: %w", e.ep.Addr(), err)
	}
	return nil
}
