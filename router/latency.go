package router

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// An engine's latency model, learned online from what the router sees of
// the calls it sends there (no engine extension: MLC's engines say little
// of themselves):
//
//   - time to first token, from the call to its first token (a prefill
//     engine: to the end of its remote_send), against the prompt tokens
//     the engine has to prefill before it (its own, less what its prefix
//     cache held, plus those of this router's calls still prefilling
//     there) and its batch (the calls in flight there when it came);
//   - time per output token, over a stream after its first token, against
//     the batch it decoded in (the calls in flight at its first token and
//     at its end, averaged) and the prompt tokens still to prefill there
//     at its first token (an engine interleaves prefill with its decode
//     steps: a queue of long prompts slows every stream).
//
// Each is an ewls fit: a few floats per engine, a lock per observation,
// none per prediction. A router keeps them only for a policy that reads
// Candidate.TTFT (LatencyReader), or a gate that admits against targets.
type latencyModel struct {
	ttft, tpot ewls
	// ahead is the prompt tokens of this process's calls routed to the
	// engine that have not had their first token yet.
	ahead atomic.Int64

	gaugesOnce sync.Once
	gauges     latencyGauges
}

// latencyGauges are an engine's series of caddy_mlc_latency_*.
type latencyGauges struct {
	observed, predicted [2]prometheus.Gauge
	obsSum, predSum     [2]prometheus.Counter
	absErr, count       [2]prometheus.Counter
}

// The metrics of the latency models.
const (
	latTTFT = iota
	latTPOT
)

var latencyNames = [2]string{"ttft", "tpot"}

// init sizes the fits and makes the engine's series, once.
func (m *latencyModel) init(addr string) {
	m.gaugesOnce.Do(func() {
		m.ttft.k, m.tpot.k = 3, 3
		g, lm := &m.gauges, sharedMetrics().latency
		for i, name := range latencyNames {
			g.observed[i] = lm.observed.WithLabelValues(addr, name)
			g.predicted[i] = lm.predicted.WithLabelValues(addr, name)
			g.obsSum[i] = lm.obsSum.WithLabelValues(addr, name)
			g.predSum[i] = lm.predSum.WithLabelValues(addr, name)
			g.absErr[i] = lm.absErr.WithLabelValues(addr, name)
			g.count[i] = lm.count.WithLabelValues(addr, name)
		}
	})
}

// LatencyReader is implemented by a policy that reads Candidate.TTFT and
// Candidate.TPOT: for a router whose policy reads them, the router keeps
// every engine's latency model (a fit per engine, updated once per call).
type LatencyReader interface {
	ReadsLatency() bool
}

// latencyNote is a route's bookkeeping for the latency model.
type latencyNote struct {
	at     time.Time // Routed
	first  time.Time // FirstToken; zero before
	tokens int       // the prompt tokens counted in the engine's ahead
	ahead  int64     // the engine's ahead before them
	batch  int       // the engine's other calls in flight when routed
	batch1 int       // its calls in flight at the first token
	ahead1 int64     // the prompt tokens ahead at the first token
	remote bool      // another engine prefilled it (Matched)
}

// latencyTracker keeps the engines' latency models up to date: an
// Observer, as prefixTracker.
type latencyTracker struct{}

// Interface guards.
var (
	_ Observer      = latencyTracker{}
	_ MatchObserver = latencyTracker{}
)

// modelOf is the route's engine's model.
func modelOf(r *Route) *latencyModel {
	u := r.Engine.internal()
	u.latency.init(u.addr)
	return &u.latency
}

// Routed counts the prompt in the work ahead of later calls.
func (latencyTracker) Routed(r *Route) {
	u := r.Engine.internal()
	m := modelOf(r)
	n := 0
	if r.Request != nil {
		n = len(r.Request.Prompt)
	}
	r.latency = latencyNote{at: time.Now(), tokens: n, batch: max(int(u.inflight.Load())-1, 0)}
	r.latency.ahead = m.ahead.Add(int64(n)) - int64(n)
}

// Matched is a decode engine's prep_recv (disagg): a prefill engine
// computes the prompt, not this one, so its tokens are not ahead of
// others there, and its first token says nothing of its prefill.
func (latencyTracker) Matched(r *Route, _ int) {
	modelOf(r).ahead.Add(-int64(r.latency.tokens))
	r.latency.tokens, r.latency.remote = 0, true
}

// FirstToken ends the prefill: its tokens are no longer ahead of anyone.
func (latencyTracker) FirstToken(r *Route) {
	r.latency.first = time.Now()
	r.latency.batch1 = int(r.Engine.internal().inflight.Load())
	r.latency.ahead1 = modelOf(r).ahead.Add(-int64(r.latency.tokens))
}

// Finished learns from the call: its time to first token (a prefill
// engine's remote_send: all of it), and its time per token.
func (latencyTracker) Finished(r *Route, u *Usage) {
	m, n := modelOf(r), &r.latency
	now := time.Now()
	first := n.first
	if r.Role == RoleName(engine.RolePrefill) {
		first = now
		m.ahead.Add(-int64(n.tokens))
	}
	if first.IsZero() {
		return // a whole answer: no first token seen
	}
	own := n.tokens
	if u != nil && u.CachedTokens >= 0 && u.PromptTokens > 0 {
		own = max(u.PromptTokens-u.CachedTokens, 0)
	}
	if !n.remote {
		m.learn(latTTFT, now, ttftFeatures(own, n.ahead, n.batch), first.Sub(n.at))
	}
	if u != nil && u.CompletionTokens > 1 && r.Role != RoleName(engine.RolePrefill) {
		batch := float64(n.batch1+int(r.Engine.internal().inflight.Load())) / 2
		m.learn(latTPOT, now, [3]float64{1, batch, float64(n.ahead1)}, now.Sub(first)/time.Duration(u.CompletionTokens-1))
	}
}

// Failed counts the prompt back if it was still ahead; a failed call
// teaches nothing of the engine's speed.
func (latencyTracker) Failed(r *Route, _ error) {
	if r.latency.first.IsZero() {
		modelOf(r).ahead.Add(-int64(r.latency.tokens))
	}
}

// ttftFeatures are the time-to-first-token fit's x: 1, the prompt tokens
// to prefill (the call's own and those ahead of it), the batch.
func ttftFeatures(own int, ahead int64, batch int) [3]float64 {
	return [3]float64{1, float64(own) + float64(ahead), float64(batch)}
}

// learn adds an observation of metric and exports it beside what the
// model predicted for it.
func (m *latencyModel) learn(metric int, now time.Time, x [3]float64, y time.Duration) {
	fit := &m.ttft
	if metric == latTPOT {
		fit = &m.tpot
	}
	pred := fit.observe(now, x, y.Seconds())
	g := &m.gauges
	g.observed[metric].Set(y.Seconds())
	if pred < 0 {
		return
	}
	g.predicted[metric].Set(pred)
	g.obsSum[metric].Add(y.Seconds())
	g.predSum[metric].Add(pred)
	g.absErr[metric].Add(math.Abs(y.Seconds() - pred))
	g.count[metric].Inc()
}

// predict is the engine's predicted time to first token for a prompt of
// tokens more to prefill, as it stands and idle, and its time per output
// token with one more call in its batch; 0 for what its model cannot say
// yet.
func (u *Upstream) predict(now time.Time, tokens int) (ttft, tpot, idle time.Duration) {
	m := &u.latency
	batch := int(u.inflight.Load())
	seconds := func(y float64) time.Duration { return max(time.Duration(y*float64(time.Second)), 1) }
	if y, ok := m.ttft.predict(now, ttftFeatures(tokens, m.ahead.Load(), batch)); ok {
		ttft = seconds(y)
		y, _ = m.ttft.predict(now, ttftFeatures(tokens, 0, 0))
		idle = seconds(y)
	}
	if y, ok := m.tpot.predict(now, [3]float64{1, float64(batch + 1), float64(m.ahead.Load())}); ok {
		tpot = seconds(y)
	}
	return ttft, tpot, idle
}

// latencyMetrics are the latency models' series, by engine and metric
// (ttft, tpot): the last observation and what the model predicted for it,
// and sums over observations the model had a prediction for, so that
// rate(abs_error)/rate(observed) is its relative error.
type latencyMetrics struct {
	observed, predicted *prometheus.GaugeVec
	obsSum, predSum     *prometheus.CounterVec
	absErr, count       *prometheus.CounterVec
}

func newLatencyMetrics() latencyMetrics {
	labels := []string{"engine", "metric"}
	gauge := func(name, help string) *prometheus.GaugeVec { return newGaugeVec(name, help, labels...) }
	counter := func(name, help string) *prometheus.CounterVec { return newCounterVec(name, help, labels...) }
	return latencyMetrics{
		observed:  gauge("latency_observed_seconds", "The last time to first token (ttft) or time per output token (tpot) the router observed on each engine."),
		predicted: gauge("latency_predicted_seconds", "What the engine's latency model predicted for the last observation, before learning from it."),
		obsSum:    counter("latency_observed_seconds_total", "Observed latencies summed, over the observations the model had a prediction for."),
		predSum:   counter("latency_predicted_seconds_total", "Predicted latencies summed, over the same observations."),
		absErr:    counter("latency_abs_error_seconds_total", "|observed - predicted| summed: rate() of it over rate() of observed is the model's relative error."),
		count:     counter("latency_predictions_total", "Observations the model had a prediction for."),
	}
}

func (l latencyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.observed, l.predicted, l.obsSum, l.predSum, l.absErr, l.count}
}

// predictFleet is the least predicted time to first token of a prompt of
// n tokens among the ready engines of us, as they are (best) and idle
// (floor); ok false when no engine's model can say.
func predictFleet(us []*Upstream, n int) (best, floor time.Duration, ok bool) {
	now := time.Now()
	for _, u := range us {
		if ready, _ := u.status(); !ready || u.OutOfRotation() {
			continue
		}
		t, _, idle := u.predict(now, n)
		if t == 0 {
			continue
		}
		if !ok || t < best {
			best = t
		}
		if !ok || idle < floor {
			floor = idle
		}
		ok = true
	}
	return best, floor, ok
}

// statusPrompt is the prompt the status predicts for, in tokens.
const statusPrompt = 128

// PredictedStatus is an engine's latency model as operators see it: its
// predicted time to first token for a prompt of 128 tokens, and per
// output token, as the engine stands now; 0 for what it cannot say.
type PredictedStatus struct {
	TTFTMs float64 `json:"ttft_ms"`
	TPOTMs float64 `json:"tpot_ms"`
}

// predictedStatus is u's model now; nil while it can say nothing.
func predictedStatus(u *Upstream) *PredictedStatus {
	ttft, tpot, _ := u.predict(time.Now(), statusPrompt)
	if ttft == 0 && tpot == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &PredictedStatus{TTFTMs: ms(ttft), TPOTMs: ms(tpot)}
}
