package fleet

import (
	"context"
	"time"
)

// A Scaler sizes a fleet's spawned engines while they run (the
// autoscaler, autoscale.go): the fleet ticks it from the moment its
// engines are ready until they stop, and its state shows in /mlc/engines.
type Scaler interface {
	// Interval is the time to the next Tick.
	Interval() time.Duration
	// Tick takes one decision and starts its action; ctx ends with the
	// fleet's engines.
	Tick(ctx context.Context)
	// Status is the autoscaling as operators see it; nil without one.
	Status() *ScaleStatus
	// EngineState is its hold on engine i: "" when it runs as usual.
	EngineState(i int) string
	// Asleep reports that every engine may be scaled down (min 0): the
	// next request starts one, so the router is ready all the same.
	Asleep() bool
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

// ScaleEvent is the autoscaler's last change, as operators see it.
type ScaleEvent struct {
	At        time.Time `json:"at"`
	Direction string    `json:"direction"` // up or down
	Reason    string    `json:"reason"`
	Engine    string    `json:"engine"`
	Error     string    `json:"error,omitempty"`
}
