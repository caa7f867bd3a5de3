package fleet

import (
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// moveSlack bounds the wait for the attempts moved off a retired fleet
// to let go of its engines: cancelled, they end at once.
const moveSlack = 10 * time.Second

// Retire is called when no config holds the fleet any more: new work
// goes to the engines of the config that replaced it, the streams on it
// finish there, or move, and then its engines stop (see drainAndStop).
// During a reload it returns at once and drains in the background, so
// that neither the old config's stop nor the new config's requests wait
// for it; when the process exits (exiting) it drains and stops before
// returning, so that no engine outlives it.
func Retire(lf *Fleet, exiting bool) {
	lf.Retire()
	lf.Wake()
	if exiting {
		drainAndStop(lf)
		return
	}
	goroutine.Go(lf.Log(), "engine fleet drain", func() { drainAndStop(lf) }, func(any) { lf.Shutdown() })
}

// drainAndStop lets the streams on the fleet finish for its grace, moves
// those still running to the engines that replaced it (exactly, as
// after an operator's drain), then stops the engines.
func drainAndStop(lf *Fleet) {
	grace := lf.Grace()
	if n := lf.InFlight(); n > 0 {
		lf.Log().Info("draining engines before stopping them", zap.Int64("in_flight", n), zap.Duration("grace", grace))
	}
	if !lf.Pool().WaitIdle(grace) {
		lf.Log().Warn("drain grace period over: the streams still on the old engines move to the new ones",
			zap.Int64("in_flight", lf.InFlight()))
		for _, u := range lf.Upstreams() {
			u.MoveAttempts()
		}
		lf.Pool().WaitIdle(moveSlack)
	}
	lf.Shutdown()
}
