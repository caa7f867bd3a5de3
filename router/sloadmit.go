package router

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
)

// SLOAdmission is what the gate does with a request whose time to first
// token is predicted to miss its target on every engine: with Shed, it
// waits in the gate while waiting can still meet the target (the
// engines' queues drain), and is refused at once when it cannot (even an
// idle engine would be late), or when its wait ran out; without, it is
// served, late. The predictions are the engines' latency models'
// (latency.go); while no engine's model can say, requests are served.
type SLOAdmission struct {
	// Shed turns admission against targets on.
	Shed bool
	// Status is the answer of a refused request: 503 (with Retry-After)
	// or 429; default 503.
	Status int
	// Margin is how late a request may be predicted and still be served:
	// a share of its target (0.2: 20% over). Each priority band above 0
	// tolerates another Margin, so that as the fleet nears saturation the
	// lower bands are held back first. Default DefaultSLOMargin.
	Margin float64
}

// DefaultSLOMargin is SLOAdmission.Margin by default.
const DefaultSLOMargin = 0.2

// sloPoll is how often a request held back looks at the engines again.
const sloPoll = 5 * time.Millisecond

// On says whether the gate admits against targets.
func (a SLOAdmission) On() bool { return a.Shed }

// late is how late a request of band may be predicted, beyond its
// target.
func (a SLOAdmission) late(target time.Duration, band int) time.Duration {
	return time.Duration(float64(target) * a.Margin * float64(1+max(band, 0)))
}

// sloPredictor predicts, for a prompt of n tokens, the least time to
// first token among the engines now (best) and on an idle engine (floor);
// ok false while no engine's model can say.
type sloPredictor func(n int) (best, floor time.Duration, ok bool)

// sloGate holds a request back while it is predicted to miss its time to
// first token target, as a.Shed says; begin is its arrival.
func (a SLOAdmission) hold(ctx context.Context, predict sloPredictor, f Facts, n int, begin time.Time) error {
	if !a.Shed || f.Targets.TTFT <= 0 || predict == nil {
		return nil
	}
	allowed := f.Targets.TTFT + a.late(f.Targets.TTFT, f.Band)
	var tick *time.Ticker
	for {
		best, floor, ok := predict(n)
		waited := time.Since(begin)
		switch {
		case !ok || waited+best <= allowed:
			return nil
		case waited+floor > allowed:
			return a.refusal(f, best, waited)
		}
		if tick == nil {
			tick = time.NewTicker(sloPoll)
			defer tick.Stop()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// refusal is the answer to a request held back in vain.
func (a SLOAdmission) refusal(f Facts, best, waited time.Duration) *protocol.Error {
	status, typ := a.Status, protocol.ErrTypeUnavailable
	if status == http.StatusTooManyRequests {
		typ = budget.ExceededRequests // OpenAI's type of a 429
	} else {
		status = http.StatusServiceUnavailable
	}
	msg := fmt.Sprintf("the request's time to first token target of %v cannot be met: the engines are predicted to take %v",
		f.Targets.TTFT, best.Round(time.Millisecond))
	if waited >= time.Millisecond {
		msg += fmt.Sprintf(" after %v waiting", waited.Round(time.Millisecond))
	}
	e := protocol.Errorf(status, typ, "%s; try again later or with a looser target", msg).WithCode("slo_unattainable")
	e.RetryAfter = retryAfter
	return e
}
