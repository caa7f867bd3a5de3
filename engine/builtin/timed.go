package builtin

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/timing"
)

// timed is a timed engine's stand-in for the model and the GPU it runs
// on (--timing): a generator of tokens that costs the CPU next to
// nothing, and the clock each step waits on for what the profile says
// the GPU would take. The scheduler, pages, prefix cache, preemption and
// transfers around it are the engine's own.
//
// The generator plays a model exactly: a position's "KV" is one word, a
// hash of its token and of the word of the position before it (so of
// the whole context), kept in the position's slot of the pool
// (kvcache.NewChainPool); the token after a position is drawn from its
// word. A prefix cache hit, a KV transfer and a preemption carry or lose
// those words as they would keys and values, and the text is the same
// however a prompt was split, moved or resumed: wrong words give another
// text, which the exactness tests would see.
type timed struct {
	profile timing.Profile
	scale   float64
	link    timing.Link
	seed    uint64 // the word before the first position
	tokens  []int  // the ids it generates: those the model may sample, EOS aside
	eos     int    // the EOS it ends with, -1 for none
	// eosEvery: EOS once in that many tokens on average (0: never),
	// unless ignore_eos.
	eosEvery uint64

	// The step being run: its work, and the events it holds until its
	// time is spent (nil outside a step).
	work timing.Step
	held []heldEvent
	// The clock: when the modelled GPU is free (the last step's end), and
	// whether the scheduler waited since (the next step starts from now).
	free  time.Time
	idled bool
	stats clockStats
}

// clockStats are what the clock spent, in modelled time.
type clockStats struct {
	steps int64
	busy  time.Duration // steps' modelled time
	lag   time.Duration // how late steps ended, summed
	max   time.Duration // the latest one
}

// heldEvent is an event a step produced, out once its time is spent.
type heldEvent struct {
	q  *eventQueue
	ev event
}

// defaultEOSEvery is how rarely the generator ends a text by itself
// unless told (--eos-every): EOS once in 256 tokens on average, answers
// of a chat's length.
const defaultEOSEvery = 256

// newTimed returns the timed stand-in of opts for the tokenizer's
// vocabulary: allowed are the ids the model may sample.
func newTimed(opts *Options, allowed []bool, eos map[int]bool) *timed {
	t := &timed{profile: *opts.Timing, scale: opts.TimeScale, link: opts.KVLink, eos: -1, eosEvery: uint64(opts.EOSEvery), idled: true}
	t.seed = timedFingerprint(opts)
	for id, ok := range allowed {
		switch {
		case eos[id] && t.eos < 0:
			t.eos = id
		case ok && !eos[id]:
			t.tokens = append(t.tokens, id)
		}
	}
	return t
}

// timedFingerprint names what a timed engine's words depend on: the
// tokenizer's model and the profile's model (not its GPU: an H100 and an
// A100 serving the same model exchange KV).
func timedFingerprint(opts *Options) uint64 {
	h := fnv.New64a()
	h.Write([]byte("timed\x00" + modelName(opts.Model) + "\x00" + opts.Timing.Model.Name))
	return h.Sum64()
}

// word is the word of a position after the word h of the one before it.
func word(h uint64, token int) uint64 {
	return mix64(h ^ (uint64(token)+1)*0x9e3779b97f4a7c15)
}

// mix64 is splitmix64's finalizer.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// next is the token after a position whose word is h.
func (t *timed) next(h uint64, ignoreEOS bool) int {
	if t.eos >= 0 && t.eosEvery > 0 && !ignoreEOS && h%t.eosEvery == 0 {
		return t.eos
	}
	return t.tokens[(h>>8)%uint64(len(t.tokens))]
}

// forwardTimed computes position s.kvLen of s: its word.
func (e *Engine) forwardTimed(s *sequence) {
	chain := e.sched.pool.Chain
	h := e.timed.seed
	if s.kvLen > 0 {
		h = chain[s.slots[s.kvLen-1]]
	}
	chain[s.slots[s.kvLen]] = word(h, s.tokens[s.kvLen])
	s.kvLen++
}

// nextTimed is a timed engine's next token of s, from its last word.
func (e *Engine) nextTimed(s *sequence) int {
	return e.timed.next(e.sched.pool.Chain[s.slots[s.kvLen-1]], s.req.params.ignoreEOS)
}

// emit hands an event to its handler, or holds it while a timed step
// runs: a GPU's tokens come out when its step ends.
func (e *Engine) emit(q *eventQueue, ev event) {
	if e.timed != nil && e.timed.held != nil {
		e.timed.held = append(e.timed.held, heldEvent{q, ev})
		return
	}
	q.push(ev)
}

// The methods the scheduler calls on every engine do nothing on one
// that is not timed (a nil *timed).

// beginStep starts holding a timed step's events and counting its work.
func (t *timed) beginStep() {
	if t == nil {
		return
	}
	t.work = timing.Step{}
	t.held = make([]heldEvent, 0, 8)
}

// chunk counts a prefill chunk of n positions after cached ones.
func (t *timed) chunk(n, cached int) {
	if t != nil && n > 0 {
		t.work.Prefill = append(t.work.Prefill, timing.Chunk{New: n, Cached: cached})
	}
}

// sampled counts a sequence that samples at the end of its prefill.
func (t *timed) sampled() {
	if t != nil {
		t.work.Sampled++
	}
}

// decoded counts a decoding sequence of context positions.
func (t *timed) decoded(context int) {
	if t != nil {
		t.work.Decode++
		t.work.Context += context
		t.work.Sampled++
	}
}

// waited notes that the scheduler waited for work: the GPU idled, and
// the next step starts when it begins.
func (t *timed) waited() {
	if t != nil {
		t.idled = true
	}
}

// endStep waits out the step's modelled time, scaled, from when the GPU
// was free (the last step's end; now, after the scheduler waited), then
// lets the step's events out. A step that ends later than its modelled
// end adds the difference, in modelled time, to the lag: the engine
// fell behind its GPU (its CPU, not the model, was the bottleneck). The
// next step starts at this one's modelled end, so a late engine catches
// up rather than drifting. It returns the step's time, scaled.
func (t *timed) endStep(ctx context.Context) time.Duration {
	if t == nil {
		return 0
	}
	start := t.free
	if now := time.Now(); t.idled || start.IsZero() {
		start, t.idled = now, false
	}
	d := t.profile.StepTime(t.work)
	end := start.Add(time.Duration(float64(d) * t.scale))
	if !t.work.Empty() {
		sleepUntil(ctx, end)
		t.stats.steps++
		t.stats.busy += d
		if late := t.modelled(time.Since(end)); late > 0 {
			t.stats.lag += late
			t.stats.max = max(t.stats.max, late)
		}
	}
	t.free = end
	held := t.held
	t.held = nil
	for _, h := range held {
		h.q.push(h.ev)
	}
	return t.wall(d)
}

// metrics are the clock's figures (nil: not a timed engine).
func (t *timed) metrics() *ClockMetrics {
	if t == nil {
		return nil
	}
	return &ClockMetrics{Profile: t.profile.Name, TimeScale: t.scale, Steps: t.stats.steps, Busy: t.stats.busy, Lag: t.stats.lag, MaxLag: t.stats.max}
}

// modelled is a wall-clock duration in modelled time.
func (t *timed) modelled(d time.Duration) time.Duration { return time.Duration(float64(d) / t.scale) }

// wall is a modelled duration in wall-clock time.
func (t *timed) wall(d time.Duration) time.Duration { return time.Duration(float64(d) * t.scale) }

// transferTime is the wall-clock time a KV transfer of tokens positions
// takes on the engine's link.
func (t *timed) transferTime(tokens int) time.Duration {
	return t.wall(t.profile.TransferTime(tokens, t.link))
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
