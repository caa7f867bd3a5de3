package engine

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// ErrPortInUse is wrapped by the error of an engine whose port is taken
// before it is spawned, for instance by the engines of a previous fleet
// that are still running. Spawning anyway would be worse than failing: the
// old process would answer the readiness checks of the new one.
var ErrPortInUse = errors.New("port already in use")

// checkPortFree fails when the endpoint's address cannot be listened on.
func checkPortFree(ep Endpoint) error {
	ln, err := net.Listen("tcp", ep.Addr())
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: %s", ErrPortInUse, ep.Addr())
	}
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", ep.Addr(), err)
	}
	return ln.Close()
}

// CheckPorts fails with ErrPortInUse when a port of one of the spec's
// spawned engines is taken.
func (s Spec) CheckPorts() error {
	for _, ep := range s.Endpoints {
		if ep.External {
			continue
		}
		if err := checkPortFree(ep); err != nil {
			return err
		}
	}
	return nil
}
