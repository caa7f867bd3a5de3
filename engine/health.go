package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"go.uber.org/zap"
)

// Health check settings.
const (
	// readyPollInterval is the period of GET /v1/models while an engine
	// starts.
	readyPollInterval = 100 * time.Millisecond
	// readyRecheck is how long after its first answer a spawned engine must
	// still be alive to be declared ready: an engine that cannot bind its
	// port exits, while another process may answer the probe.
	readyRecheck = 200 * time.Millisecond
	// maxProbeTimeout bounds one health request; it is also bounded by the
	// health interval, so that probes never pile up.
	maxProbeTimeout = 5 * time.Second
)

// defaultStartingLogInterval is the period of the "still starting" log
// lines of an engine that is not ready yet (Options.StartingLogInterval).
const defaultStartingLogInterval = 5 * time.Second

// ErrStartupTimeout is wrapped by the error of an engine that did not
// become ready within the startup timeout.
var ErrStartupTimeout = errors.New("engine startup timed out")

var (
	// errExited is returned by waitReady when the process exits first.
	errExited = errors.New("engine process exited")
	// errExitedWhenReady is returned by waitReady when the engine answered
	// but its process exited right after.
	errExitedWhenReady = errors.New("engine process exited as it answered")
)

// probeTimeout is the timeout of one health request under s.
func (s *Spec) probeTimeout() time.Duration { return min(s.HealthInterval, maxProbeTimeout) }

// Probe returns nil when GET <base>/v1/models answers 200 within timeout:
// the health check of an engine, for whoever else needs one (the router
// asks a decode engine after a remote_send to it got no answer).
func Probe(ctx context.Context, client *http.Client, base string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+protocol.PathModels, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/models: status %d", resp.StatusCode)
	}
	return nil
}

// waitReady polls the engine until it answers 200 and is still alive a
// moment later. It gives up when the process exits (errExited or
// errExitedWhenReady), when the startup timeout passes (wrapping
// ErrStartupTimeout and the last probe error) or when ctx is done. Every
// Options.StartingLogInterval it logs that the engine is still starting.
func (e *engine) waitReady(ctx context.Context, p *process, t0 time.Time) error {
	s := e.f.settings()
	deadline := time.NewTimer(s.StartupTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(readyPollInterval)
	defer poll.Stop()
	progress := time.NewTicker(cmp.Or(e.f.opts.StartingLogInterval, defaultStartingLogInterval))
	defer progress.Stop()
	var last error
	for {
		if last = Probe(ctx, e.f.client, e.ep.URL(), s.probeTimeout()); last == nil {
			return confirmAlive(ctx, p)
		}
		select {
		case <-p.exited:
			return errExited
		case <-deadline.C:
			return fmt.Errorf("%w after %v (last check: %v)", ErrStartupTimeout, s.StartupTimeout, last)
		case <-ctx.Done():
			return ctx.Err()
		case <-progress.C:
			e.logger().Info(fmt.Sprintf("engine %d/%d %s still starting", e.i+1, len(e.f.engines), e.ep.Addr()),
				zap.Stringer("elapsed", time.Since(t0).Round(time.Second)),
				zap.Stringer("timeout", s.StartupTimeout), zap.Int("pid", p.pid))
		case <-poll.C:
		}
	}
}

// confirmAlive guards against a readiness probe answered by some other
// process on the engine's port: the engine's process must be alive when
// it answers, and still alive readyRecheck later.
func confirmAlive(ctx context.Context, p *process) error {
	if p.reaped() {
		return errExitedWhenReady
	}
	t := time.NewTimer(readyRecheck)
	defer t.Stop()
	select {
	case <-p.exited:
		return errExitedWhenReady
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if p.reaped() {
		return errExitedWhenReady
	}
	return nil
}
