package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// ErrRetired is the start error of a fleet retired before its deferred
// launch could begin.
var ErrRetired = errors.New("engine fleet retired before it started")

// launchState is a fleet's life as its owner sees it: launched, then
// retired (no config uses it any more), then stopped.
type launchState struct {
	once     sync.Once
	launched chan struct{} // closed once the engines started, or failed to
	err      error         // valid after launched
	retired  chan struct{} // closed by Retire
	retire   sync.Once
	done     chan struct{} // closed once the engines stopped, or never started
	stopOnce sync.Once
}

func newLaunchState() launchState {
	return launchState{launched: make(chan struct{}), retired: make(chan struct{}), done: make(chan struct{})}
}

// Launch starts the engines. When engines of another fleet still run on
// some of its ports (a reload that changed the engines on the same ports:
// the old ones drain first), it does not block: the engines start in the
// background once those stopped, and, on a reload (waitPorts), once the
// ports are free. ready runs once the engines are ready, before Launched
// is closed. Launch is called once.
func (f *Fleet) Launch(reload bool, ready func(context.Context)) error {
	old := f.running.runningOn(f)
	f.running.register(f)
	if len(old) == 0 && (!reload || f.spec.CheckPorts() == nil) {
		return f.launchNow(ready)
	}
	if len(old) > 0 {
		f.logger().Info("the new engines wait for the old engines on their ports to drain and stop",
			zap.Strings("ports", sharedAddrs(f.spec, old)))
	}
	goroutine.Go(f.logger(), "deferred engine start", func() {
		for _, o := range old {
			<-o.life.done
		}
		if reload {
			f.waitPorts()
		}
		if f.Retired() {
			f.abandon(ErrRetired)
			return
		}
		if err := f.launchNow(ready); err != nil {
			f.logger().Error("starting the new engines after the old ones stopped", zap.Error(err))
		}
	}, func(p any) { f.abandon(fmt.Errorf("panic starting engines: %v", p)) })
	return nil
}

// LaunchNow starts the engines and waits until they are ready: engines
// no other fleet can hold the ports of (a dynamic source's).
func (f *Fleet) LaunchNow(ready func(context.Context)) error {
	f.running.register(f)
	return f.launchNow(ready)
}

func (f *Fleet) launchNow(ready func(context.Context)) error {
	begin := time.Now()
	f.logger().Info("starting engine fleet", zap.String("model", f.spec.Model),
		zap.String("kind", string(f.spec.Kind)), zap.Int("engines", len(f.spec.Endpoints)))
	if err := f.Start(context.Background()); err != nil {
		err = fmt.Errorf("mlc: starting engines: %w", err)
		f.abandon(err)
		return err
	}
	f.logger().Info("engine fleet ready", zap.Duration("took", time.Since(begin).Round(time.Millisecond)))
	if ready != nil {
		ready(f.launch.ctx)
	}
	f.life.once.Do(func() { close(f.life.launched) })
	return nil
}

// abandon ends a fleet whose engines never ran.
func (f *Fleet) abandon(err error) {
	f.life.once.Do(func() {
		f.life.err = err
		close(f.life.launched)
	})
	f.running.unregister(f)
	f.life.stopOnce.Do(func() { close(f.life.done) })
}

// waitPorts waits, up to the startup timeout, until the ports of the
// fleet's engines are free. On a reload a port may still be taken for a
// moment after the old engines stopped (a process that is still exiting,
// or a connection of the machine's that the kernel gave that port): the
// reload is not refused for it, its requests wait in the queue, and a port
// still taken at the end fails the start with ErrPortInUse, logged.
func (f *Fleet) waitPorts() {
	deadline := time.Now().Add(f.spec.StartupTimeout)
	logged := false
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 500 * time.Millisecond}
	for !f.Retired() && time.Now().Before(deadline) {
		err := f.spec.CheckPorts()
		if !errors.Is(err, ErrPortInUse) {
			return
		}
		if !logged {
			f.logger().Info("the new engines wait for their ports to be free", zap.Error(err))
			logged = true
		}
		time.Sleep(b.Next()) // polling a port another process holds: nothing to wait on
	}
}

// Launched is closed once the engines started, or failed to (LaunchErr
// says which).
func (f *Fleet) Launched() <-chan struct{} { return f.life.launched }

// LaunchErr returns the error of a launch that failed, or nil (also
// while it runs).
func (f *Fleet) LaunchErr() error {
	select {
	case <-f.life.launched:
		return f.life.err
	default:
		return nil
	}
}

// Retire marks the fleet as no config's any more: a deferred launch that
// has not begun is abandoned. Its owner drains it, then calls Shutdown.
func (f *Fleet) Retire() { f.life.retire.Do(func() { close(f.life.retired) }) }

// Retired reports whether Retire was called.
func (f *Fleet) Retired() bool {
	select {
	case <-f.life.retired:
		return true
	default:
		return false
	}
}

// Shutdown stops the engines once their launch ended (at once for a
// launch that failed) and closes Done.
func (f *Fleet) Shutdown() {
	<-f.life.launched
	if f.life.err != nil {
		return // nothing runs; done is closed
	}
	_ = f.Stop()
	f.running.unregister(f)
	f.life.stopOnce.Do(func() { close(f.life.done) })
}

// Done is closed once the engines stopped, or never started.
func (f *Fleet) Done() <-chan struct{} { return f.life.done }

// Running is the fleets of a process whose engines run (or start), so
// that a new fleet finds the ports it must wait for: on a reload the new
// config's fleet starts before the old one's stops. Its owner (the mlc
// app's lifecycle, across reloads) gives it every fleet (Options.Running).
type Running struct {
	mu     sync.Mutex
	fleets map[*Fleet]bool
}

// NewRunning returns an empty Running.
func NewRunning() *Running { return &Running{fleets: map[*Fleet]bool{}} }

func (r *Running) register(f *Fleet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fleets[f] = true
}

func (r *Running) unregister(f *Fleet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.fleets, f)
}

// runningOn returns the running fleets of other specs that have an
// endpoint on one of f's addresses.
func (r *Running) runningOn(f *Fleet) []*Fleet {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Fleet
	for o := range r.fleets {
		if o != f && o.spec.Key() != f.spec.Key() && len(sharedAddrs(f.spec, []*Fleet{o})) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// sharedAddrs returns spec's spawned endpoint addresses that one of the
// fleets also has.
func sharedAddrs(spec Spec, fleets []*Fleet) []string {
	var out []string
	for _, ep := range spec.Endpoints {
		for _, o := range fleets {
			if !ep.External && slices.ContainsFunc(o.spec.Endpoints, func(e Endpoint) bool { return e.Addr() == ep.Addr() }) {
				out = append(out, ep.Addr())
				break
			}
		}
	}
	return out
}
