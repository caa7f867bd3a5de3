package engine

// State is the lifecycle state of one engine of a fleet.
type State int

// The engine states.
const (
	// StateStopped: not running, before Start or after Stop.
	StateStopped State = iota
	// StateStarting: spawned (or, for an external engine, never yet
	// seen healthy) and not yet answering GET /v1/models.
	StateStarting
	// StateReady: answering GET /v1/models; the router may use it.
	StateReady
	// StateUnhealthy: running but failing its health checks; out of
	// rotation until it answers again.
	StateUnhealthy
	// StateRestarting: the process died; waiting out the backoff or
	// waiting for the new process to become ready.
	StateRestarting
	// StateFailed: the engine could not be started and is not retried
	// (the fleet's Start failed because of it).
	StateFailed
)

var stateNames = [...]string{"stopped", "starting", "ready", "unhealthy", "restarting", "failed"}

// String returns the state's lower-case name.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}
