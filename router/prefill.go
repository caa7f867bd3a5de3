package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// A long prompt is work, not a stall: an engine sends nothing while it
// prefills, for seconds on a GPU with a long context and longer on slow
// hardware, so the watchdog of a call's first byte allows the engine
// timeout plus the predicted prefill time of the prompt on that engine
// (its latency model when the router keeps one, else the configured
// rate), bounded by max_prefill_time. Past the engine timeout the engine
// is probed (GET /v1/models, which MLC's engines answer while they
// compute): one that does not answer is frozen and the call given up as
// before. When the allowance runs out on an engine that answers, its
// metrics say whether it is still prefilling (MLC's
// engine_prefill_time_sum grows at every prefill step, a long prompt's
// chunks included): one that is goes on, however slow the host, until
// max_prefill_time; one that is not, or says nothing, has its call given
// up without blame (a prefill overrun, retried once).

// Defaults of the prefill bounds.
const (
	// DefaultPrefillRate is the prefill speed, in prompt tokens a second,
	// assumed of an engine whose latency model cannot say yet: slow for
	// a GPU (thousands to tens of thousands), so that the allowance errs
	// long, and the probes still catch a frozen engine.
	DefaultPrefillRate = 1000.0
	// DefaultMaxPrefillTime bounds a prompt's prefill: a prompt predicted
	// to take longer on every engine is refused up front (413).
	DefaultMaxPrefillTime = 10 * time.Minute
)

// prefillPlan is what a call's watchdog allows for the engine's prefill
// before the call's first byte or token, and what it probes meanwhile.
type prefillPlan struct {
	allow  time.Duration // beyond the engine timeout
	limit  time.Duration // max_prefill_time: the longest wait on an engine that prefills
	tokens int           // the prompt tokens the engine computes, for errors
	// also are the engines besides the callee that the call waits on
	// (a remote_send's decode engine, which receives the KV).
	also []string
}

type prefillKey struct{}

// prefillScaleKey carries the factor on the allowances of a choice's
// next attempt: 2 after a prefill overrun (the prediction was short).
type prefillScaleKey struct{}

// errPrefillOverrun is the cause of a call given up because its prefill
// outran its allowance while the engine kept answering its probes.
var errPrefillOverrun = errors.New("prefill took longer than predicted")

// withPrefillScale sets the factor on the allowances of an attempt.
func withPrefillScale(ctx context.Context, scale int) context.Context {
	if scale <= 1 {
		return ctx
	}
	return context.WithValue(ctx, prefillScaleKey{}, scale)
}

// planPrefill is ctx for a call on u that prefills tokens of the prompt
// (those its prefix cache does not hold: see lease.uncached), waiting
// also on the engines at the URLs of also.
func (c *Config) planPrefill(ctx context.Context, u *Upstream, readsLatency bool, tokens int, also ...string) context.Context {
	if tokens <= 0 {
		return ctx
	}
	allow := c.prefillTime(u, readsLatency, tokens)
	if scale, ok := ctx.Value(prefillScaleKey{}).(int); ok {
		allow *= time.Duration(scale)
	}
	limit := c.maxPrefillTime()
	return context.WithValue(ctx, prefillKey{}, prefillPlan{allow: min(allow, limit), limit: limit, tokens: tokens, also: also})
}

// uncached is how many of the first n prompt tokens the lease's engine
// has to compute: n less what its prefix cache is expected to hold (the
// prefix index's pages known computed there when the call was routed,
// for a router that keeps the index; nothing otherwise), never less
// than the last token, which an engine always computes.
func (l *lease) uncached(n int) int {
	if n <= 0 {
		return n
	}
	return n - min(max(l.route.prefix.predicted, 0), n-1)
}

// leastUncached is the fewest tokens of prompt that any of the router's
// engines is expected to have to compute, by the prefix index where the
// router keeps one (the pages known computed there); all of them
// otherwise.
func (r *Router) leastUncached(prompt []int) int {
	n := len(prompt)
	if !r.readsPrefixes || n == 0 {
		return n
	}
	q := &Request{Prompt: prompt}
	held := 0
	for role := range r.roles {
		chain := windowChain(role, q)
		for _, u := range r.candidates(role) {
			held = max(held, u.prefixes.matchHeld(chain))
		}
	}
	return n - min(held, n-1)
}

// prefillOf is the plan of a call made with ctx; zero: none.
func prefillOf(ctx context.Context) prefillPlan {
	p, _ := ctx.Value(prefillKey{}).(prefillPlan)
	return p
}

// prefillTime is the predicted time for u to prefill tokens of a prompt:
// its latency model's time to first token, the work ahead of it
// included, where the router keeps one that can say; else tokens at the
// configured rate, once for each call already prefilling there (they
// share its prefill steps).
func (c *Config) prefillTime(u *Upstream, readsLatency bool, tokens int) time.Duration {
	if readsLatency && u != nil {
		if ttft, _, _ := u.predict(time.Now(), tokens); ttft > 0 {
			return ttft
		}
	}
	d := time.Duration(float64(tokens) / c.prefillRate() * float64(time.Second))
	if u != nil {
		d *= time.Duration(max(u.prefilling.Load(), 1))
	}
	return d
}

func (c *Config) prefillRate() float64 {
	if c.PrefillRate > 0 {
		return c.PrefillRate
	}
	return DefaultPrefillRate
}

func (c *Config) maxPrefillTime() time.Duration {
	if c.MaxPrefillTime > 0 {
		return c.MaxPrefillTime
	}
	return DefaultMaxPrefillTime
}

// checkPrefillTime refuses a prompt of n tokens that no engine is
// predicted to prefill within max_prefill_time, idle: 413
// prompt_too_long, naming the prompt's tokens and the limit. uncached
// is the fewest of them an engine has to compute (see leastUncached);
// predict is the fleet's idle time to first token for that many (ok
// false when no model can say), else the configured rate decides.
func (c *Config) checkPrefillTime(n, uncached int, predict sloPredictor) *protocol.Error {
	limit := c.maxPrefillTime()
	var d time.Duration
	ok := false
	if predict != nil {
		_, d, ok = predict(uncached)
	}
	if !ok {
		d = time.Duration(float64(uncached) / c.prefillRate() * float64(time.Second))
	}
	if d <= limit {
		return nil
	}
	tokens := fmt.Sprintf("%d tokens", n)
	if uncached < n {
		tokens += fmt.Sprintf(" (%d of them in no engine's prefix cache)", uncached)
	}
	return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.ErrTypeInvalidRequest,
		"the prompt's %s would take about %v to prefill, above this server's max_prefill_time of %v",
		tokens, d.Round(time.Second), limit).WithCode("prompt_too_long")
}

// prefillTimeoutError is the answer when a choice's prefill outran its
// allowance twice.
func prefillTimeoutError(err error) *protocol.Error {
	return protocol.Errorf(http.StatusGatewayTimeout, protocol.ErrTypeServer,
		"the prompt's prefill took longer than predicted on two attempts: %v", err).WithCode("prefill_timeout")
}

// Probes of an engine a call waits on past the engine timeout: every
// quarter of it, each bounded by half of it and at most a second, so
// that a frozen engine is caught within about the engine timeout and a
// second, as a silent stream is.
const (
	minPrefillProbe = 100 * time.Millisecond
	maxProbeTimeout = time.Second
)

func prefillProbeEvery(quiet time.Duration) time.Duration { return max(quiet/4, minPrefillProbe) }

func prefillProbeTimeout(quiet time.Duration) time.Duration {
	return min(max(quiet/2, minPrefillProbe), maxProbeTimeout)
}

// nextBark is when the watchdog looks next after the call's progress:
// after the engine timeout; for a call waiting on a prefill, a probe's
// timeout sooner, so that a frozen engine is given up at the engine
// timeout, as a silent one always was.
func (cl *call) nextBark() time.Duration {
	if cl.prefill.allow > 0 && cl.kind != callWhole && !cl.moved.Load() {
		return cl.quiet - prefillProbeTimeout(cl.quiet)
	}
	return cl.quiet
}

// watchPrefill is the watchdog's for a call with a prefill plan that
// still waits for its first byte or token: when to look again while it
// goes on waiting (0 once the call ended), else the cause to give it up
// with: errEngineSilent when an engine does not answer its probe,
// errPrefillOverrun when the allowance ran out on an engine that does.
func (cl *call) watchPrefill() (time.Duration, error) {
	waited := time.Since(cl.began)
	if err := cl.probePrefill(); err != nil {
		if cl.ctx.Err() != nil {
			return 0, nil // the call ended meanwhile
		}
		// A probe lost to a busy host is forgiven while the engine
		// gives other calls tokens.
		if time.Since(cl.t.lastToken()) >= prefillProbeEvery(cl.quiet) {
			return 0, errEngineSilent
		}
	}
	left := max(cl.quiet+cl.prefill.allow-waited, cl.work.left())
	if left <= 0 {
		// Queued behind the engine's other work, which moves: busy, as
		// a stream's first token is (see bark), for as long.
		busy := cl.quiet - time.Since(cl.t.lastToken())
		switch {
		case busy > 0 && waited < maxQueuedTimeouts*cl.quiet+cl.prefill.allow:
			left = busy
		case waited < cl.quiet+cl.prefill.limit && cl.prefilling():
			left = cl.quiet
		default:
			return 0, errPrefillOverrun
		}
	}
	return min(prefillProbeEvery(cl.quiet), left), nil
}

// prefillWork is what a call's watchdog saw of its engine's prefill
// work past the call's allowance.
type prefillWork struct {
	mu    sync.Mutex
	asked bool
	last  float64   // engine_prefill_time_sum when last asked
	until time.Time // the wait granted by the last answer
}

// left is the wait the last answer granted that is left.
func (w *prefillWork) left() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Until(w.until)
}

// grows records the engine's count now, and reports whether it grew
// since the last time (the first time: that it is reported at all), when
// the call may wait for another grant.
func (w *prefillWork) grows(now float64, grant time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	grew := !w.asked || now > w.last
	w.asked, w.last = true, now
	if grew {
		w.until = time.Now().Add(grant)
	}
	return grew
}

// prefilling reports whether the call's engine was prefilling since the
// last time the call asked (its engine_prefill_time_sum grew), or, the
// first time, that it reports the count at all: the engine gets one more
// engine timeout to show that it works. An engine that does not report
// it, or does not answer within the engine timeout (the query waits for
// the engine's step to end), is not.
func (cl *call) prefilling() bool {
	extra, err := engine.QueryMetrics(cl.ctx, cl.probe, cl.t.baseURL(), cl.quiet)
	if err != nil {
		return false
	}
	now, ok := protocol.PrefillTimeOf(extra)
	if !ok {
		return false
	}
	return cl.work.grows(now, cl.quiet)
}

// probePrefill asks the engines the call waits on whether they answer.
func (cl *call) probePrefill() error {
	timeout := prefillProbeTimeout(cl.quiet)
	for _, base := range append([]string{cl.t.baseURL()}, cl.prefill.also...) {
		if err := engine.Probe(cl.ctx, cl.probe, base, timeout); err != nil {
			return fmt.Errorf("probing %s: %w", base, err)
		}
	}
	return nil
}

// overrun is the engineError of a call whose prefill outran its
// allowance: retried, blaming nobody (the engine answered its probes).
func (cl *call) overrun(ee *engineError) {
	ee.retry, ee.timeout, ee.prefill = true, true, true
	ee.verdict = noVerdict
	ee.err = fmt.Errorf("%w: no first token for %v, %v allowed for %d prompt tokens", errPrefillOverrun,
		time.Since(cl.began).Round(time.Millisecond), (cl.quiet + cl.prefill.allow).Round(time.Millisecond), cl.prefill.tokens)
}

// prefillRetry is what follows a choice's attempt that ended with err,
// retried for cause: after a prefill overrun, nil for one retry (with
// twice the allowance), the 504 that ends the choice after the second.
func (j *choiceJob) prefillRetry(cause string, err error) *protocol.Error {
	if cause != causePrefill {
		return nil
	}
	j.prefillOverruns++
	if j.prefillOverruns > 1 {
		return prefillTimeoutError(err)
	}
	return nil
}

// WaitsStatus are a router's bounds on a request's waits as operators
// see them (GET /mlc/engines): the prefill rate assumed before the
// latency models predict, the longest prefill allowed, a request's whole
// time (0: none) and a waiting stream's keep-alive (0: none).
type WaitsStatus struct {
	EngineTimeout  string  `json:"engine_timeout"`
	PrefillRate    float64 `json:"prefill_rate"`
	MaxPrefillTime string  `json:"max_prefill_time"`
	RequestTimeout string  `json:"request_timeout,omitempty"`
	KeepAlive      string  `json:"keepalive,omitempty"`
}

// waitsStatus is c's WaitsStatus.
func (c *Config) waitsStatus() WaitsStatus {
	s := WaitsStatus{EngineTimeout: c.EngineTimeout.String(), PrefillRate: c.prefillRate(), MaxPrefillTime: c.maxPrefillTime().String()}
	if c.RequestTimeout > 0 {
		s.RequestTimeout = c.RequestTimeout.String()
	}
	if c.KeepAlive > 0 {
		s.KeepAlive = c.KeepAlive.String()
	}
	return s
}
