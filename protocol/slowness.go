package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// PathSlowness is an extension of the built-in engine only, which MLC's
// engines do not serve (a 404 there): a POST of a Slowness, on an engine
// started with --enable-debug, replaces the engine's, and the answer is
// the one before. It lets a test or a benchmark slow one engine of a
// fleet in the middle of a run, as a GPU that throttles would; the router
// never calls it.
const PathSlowness = "/builtin/slowness"

// MaxSlowness bounds each delay of a Slowness: more would hold the
// engine's scheduler past any engine_timeout.
const MaxSlowness = 10 * time.Second

// Slowness is compute time a built-in engine adds to its own, so that a
// fleet of equal processes can play a fleet of unequal GPUs: a prefill
// that computes n prompt tokens takes n*PrefillPerToken longer, every
// decode step of the batch DecodePerStep longer. On the wire the
// durations are microseconds.
type Slowness struct {
	PrefillPerToken time.Duration `json:"-"`
	DecodePerStep   time.Duration `json:"-"`
}

// slownessWire is Slowness as JSON.
type slownessWire struct {
	PrefillPerTokenUs int64 `json:"prefill_delay_us"`
	DecodePerStepUs   int64 `json:"decode_delay_us"`
}

// MarshalJSON writes the delays in microseconds.
func (s Slowness) MarshalJSON() ([]byte, error) {
	return json.Marshal(slownessWire{s.PrefillPerToken.Microseconds(), s.DecodePerStep.Microseconds()})
}

// UnmarshalJSON reads the delays in microseconds.
func (s *Slowness) UnmarshalJSON(b []byte) error {
	var w slownessWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.PrefillPerToken = time.Duration(w.PrefillPerTokenUs) * time.Microsecond
	s.DecodePerStep = time.Duration(w.DecodePerStepUs) * time.Microsecond
	return nil
}

// Validate checks that both delays are in [0, MaxSlowness].
func (s Slowness) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"prefill delay", s.PrefillPerToken}, {"decode delay", s.DecodePerStep}} {
		if d.v < 0 || d.v > MaxSlowness {
			return fmt.Errorf("%s %v: want 0 to %v", d.name, d.v, MaxSlowness)
		}
	}
	return nil
}
