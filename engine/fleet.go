package engine

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ErrStopped is returned by Start on a fleet that was stopped.
var ErrStopped = errors.New("engine fleet stopped")

// Options are the parts of a fleet that are not configuration: they do not
// take part in [Spec.Key].
type Options struct {
	// Logger receives the fleet's events and the engines' output, until
	// [Fleet.Reconfigure] replaces it.
	Logger *zap.Logger
	// UIDSource overrides the NVSHMEM unique id source chosen by Spec.UID.
	// The fleet closes it on Stop.
	UIDSource UIDSource
	// HTTPClient is used for readiness and health checks. The default
	// ignores proxy environment variables.
	HTTPClient *http.Client
	// Inventory lists this machine's GPUs before engines that use them
	// (KindMLC) start;
	// defaults to [Inventory].
	Inventory func(*zap.Logger) ([]GPU, error)
	// OnStateChange, if set, is called after every state change of an
	// engine, from that engine's goroutine, in order. It must not block.
	OnStateChange func(i int, from, to State)
	// Running is the process's running fleets, which a launch waits for
	// where they hold its ports; nil: none but this one.
	Running *Running
	// StartingLogInterval is the period of the "still starting" log lines
	// of an engine that is not ready yet; 0: 5s.
	StartingLogInterval time.Duration
	// SampleGPUs reads the machine's GPUs for the GPU metrics; nil:
	// SampleGPUs (NVML).
	SampleGPUs func() ([]GPUSample, error)
	// OnSuperviseTick, if set, is called by supervision at every health
	// tick of engine i (tests make it panic).
	OnSuperviseTick func(i int)
}

// Fleet runs and supervises the engines of one [Spec]. Its methods are safe
// for concurrent use. Start and Stop are idempotent.
type Fleet struct {
	spec    Spec // normalized; what defines the processes never changes
	opts    Options
	client  *http.Client
	engines []*engine

	// live is the current spec: the same processes as spec, with the roles
	// and supervision settings of the latest Reconfigure. logp is the
	// current logger. Every goroutine of the fleet reads both anew.
	live        atomic.Pointer[Spec]
	logp        atomic.Pointer[zap.Logger]
	reconfigMu  sync.Mutex    // serializes Reconfigure
	reconfigSig chan struct{} // closed at the next Reconfigure; under mu

	launch launcher // starts, supervises and stops the processes

	mu      sync.Mutex
	changed chan struct{}

	life    launchState // Launch, Retire, Shutdown
	running *Running    // Options.Running, or one of its own
}

// New validates spec and returns a fleet that is not started yet.
func New(spec Spec, opts Options) (*Fleet, error) {
	spec = spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	f := &Fleet{spec: spec, opts: opts, client: opts.HTTPClient,
		changed: make(chan struct{}), reconfigSig: make(chan struct{}), life: newLaunchState()}
	f.live.Store(&spec)
	f.logp.Store(orDefault(opts.Logger, zap.NewNop()))
	if f.client == nil {
		f.client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	}
	if f.running = opts.Running; f.running == nil {
		f.running = NewRunning()
	}
	f.launch.init(f)
	for i, ep := range spec.Endpoints {
		f.engines = append(f.engines, newEngine(f, i, ep))
	}
	return f, nil
}

// Len returns the number of endpoints.
func (f *Fleet) Len() int { return len(f.engines) }

// Endpoint returns endpoint i, with its role as last configured.
func (f *Fleet) Endpoint(i int) Endpoint { return f.settings().Endpoints[i] }

// DeviceIDStarts returns the first device (and NVSHMEM PE) of every
// endpoint, with the total number of GPUs last.
func (f *Fleet) DeviceIDStarts() []int { return f.spec.DeviceIDStarts() }

// State returns the state of engine i.
func (f *Fleet) State(i int) State {
	s, _ := f.Status(i)
	return s
}

// Ready reports whether engine i answers its health checks and may be
// given requests. It is false from the moment its process is known dead.
func (f *Fleet) Ready(i int) bool { return f.State(i) == StateReady }

// Restarts returns how many times the fleet tried to restart engine i
// after its process died.
func (f *Fleet) Restarts(i int) int { return f.engines[i].getRestarts() }

// PID returns the process id of engine i, or 0 if it has no process.
func (f *Fleet) PID(i int) int {
	_, pid := f.Status(i)
	return pid
}

// Changed returns a channel that is closed at the next state change of any
// engine. To wait for a condition without missing a change, take the
// channel first, then check the condition, then wait on the channel.
func (f *Fleet) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// notify wakes the waiters of Changed.
func (f *Fleet) notify() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Start starts every spawned engine of the fleet concurrently, and the
// health checks of external ones, and returns once all spawned engines
// answer GET /v1/models. It fails as soon as one engine exits, when one
// does not become ready within the startup timeout, or when ctx is done;
// the fleet is then stopped. Calling Start again returns the first
// call's result; concurrent calls wait for it.
func (f *Fleet) Start(ctx context.Context) error { return f.launch.start(ctx) }

// Stop stops every engine: SIGTERM to each process group, SIGKILL after the
// grace period. It returns when all processes are gone, and stops the
// NVSHMEM uid helper. A Start in progress is abandoned. Stop is idempotent
// and may be called from any goroutine.
func (f *Fleet) Stop() error {
	f.launch.stop()
	return nil
}

// Status returns the state and the process id of engine i, read together:
// an engine is never seen ready without a process, nor with a process
// known to be dead.
func (f *Fleet) Status(i int) (State, int) { return f.engines[i].status() }

// Since returns when engine i entered its state (zero before its first).
func (f *Fleet) Since(i int) time.Time {
	e := f.engines[i]
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.since
}

// Served tells the fleet that engine i just did real work for the router:
// it answered a call or sent a stream chunk. This is the passive half of
// health checking: an engine that serves traffic is not taken out of
// rotation, nor killed as hung, because its health probes are slow.
func (f *Fleet) Served(i int) { f.engines[i].served() }
