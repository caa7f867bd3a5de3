package engine

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/backoff"
)

// Restart backoff: the first restart waits 200 ms, each failed attempt
// doubles the wait up to 10 s. An engine that stayed up for backoffReset
// before dying starts again from the shortest wait.
const backoffReset = time.Minute

// restartBackoff returns the restart delay of one engine.
func restartBackoff() *backoff.Backoff {
	return &backoff.Backoff{Min: 200 * time.Millisecond, Max: 10 * time.Second}
}
