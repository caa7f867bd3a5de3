package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Readiness polling settings.
const (
	// readyPollInterval is the period of GET /v1/models while an engine
	// starts.
	readyPollInterval = 100 * time.Millisecond
	// probeTimeout bounds one health request.
	probeTimeout = 3 * time.Second
	// unhealthyAfter is how many failed checks in a row take a ready engine
	// out of rotation.
	unhealthyAfter = 2
)

// ErrStartupTimeout is wrapped by the error of an engine that did not
// become ready within the startup timeout.
var ErrStartupTimeout = errors.New("engine startup timed out")

// probe returns nil when GET <base>/v1/models answers 200.
func probe(ctx context.Context, client *http.Client, base string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
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

// waitReady polls base until it answers 200. It gives up when exited is
// closed (returning errExited), when timeout passes (wrapping
// ErrStartupTimeout and the last probe error) or when ctx is done.
func waitReady(ctx context.Context, client *http.Client, base string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	var last error
	for {
		if last = probe(ctx, client, base); last == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-deadline.C:
			return fmt.Errorf("%w after %v (last check: %v)", ErrStartupTimeout, timeout, last)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// errExited is returned by waitReady when the process exits first.
var errExited = errors.New("engine process exited")
