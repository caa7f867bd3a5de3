package builtin

import (
	"context"
	"time"
)

// step is one scheduler iteration: admit the waiting sequences and make
// the prep_recv reservations that pages allow, prefill up to
// prefill_chunk_size prompt tokens, then decode one token of every running
// sequence. It reports whether it made progress; a running sequence always
// makes some (it computes, or is preempted).
func (e *Engine) step(ctx context.Context) bool {
	admitted := e.sched.admit()
	served := e.servePrepRecvs()
	e.blocked = len(e.sched.waiting) + len(e.pendingPrep)
	progress := admitted || served || len(e.sched.running) > 0
	e.timed.beginStep()
	var decoding []*sequence
	if e.timed != nil {
		// A GPU decodes a token in the forward pass after the one that
		// sampled it: a prompt whose prefill ends now decodes next step.
		decoding = e.sched.decoding()
	}
	prefilled := e.prefill()
	if e.timed == nil {
		decoding = e.sched.decoding()
	}
	e.decode(decoding)
	if d := e.timed.endStep(ctx); prefilled {
		// A timed engine's prefill takes its modelled time, not the
		// bookkeeping's: what a router watches a long prefill grow by.
		e.stats.prefillTime += d
	}
	return progress
}

// slowDown spends the compute a slower accelerator would (the engine's
// Slowness) on prefilled prompt tokens, or on a decode step when prefilled
// is negative, before their tokens come out. The scheduler sleeps, as it
// would wait on a GPU: requests that arrive meanwhile wait for the next
// step.
func (e *Engine) slowDown(prefilled int) {
	s := e.slowness.Load()
	if s == nil {
		return
	}
	d := s.DecodePerStep
	if prefilled >= 0 {
		d = time.Duration(prefilled) * s.PrefillPerToken
	}
	if d > 0 {
		time.Sleep(d)
	}
}

// prefill computes prompt positions of sequences that have not started
// decoding, up to prefill_chunk_size positions in all, shared among them
// (see prefillShares): a short prompt that comes while a long one
// prefills gets its first token within a step or two instead of waiting
// for the long one's last chunk. However a prompt is chunked, its
// positions are computed in order, so its text is the same. It reports
// whether it computed any.
func (e *Engine) prefill() bool {
	pending, shares := e.sched.prefilling()
	if len(pending) == 0 {
		return false
	}
	if e.timed == nil {
		t0 := time.Now()
		defer func() { e.stats.prefillTime += time.Since(t0) }()
	}
	computed := false
	for i, n := range shares {
		s := pending[i]
		if s.state != seqRunning || n == 0 && s.kvLen < s.target() {
			continue // preempted by an earlier sequence's reservation, or no share
		}
		if s.fresh {
			e.sched.rematch(s)
			n = min(n, s.target()-s.kvLen)
		}
		if !e.sched.reserve(s, s.kvLen+n) {
			continue
		}
		e.slowDown(n)
		e.timed.chunk(n, s.kvLen)
		computed = computed || n > 0
		for range n {
			e.forward(s, s.kvLen+1 == s.target() && !s.req.computeOnly)
		}
		e.stats.prefillTokens += int64(n)
		if s.kvLen < s.target() {
			continue
		}
		if s.req.computeOnly {
			e.finishCompute(s)
			continue
		}
		s.decoding = true
		e.timed.sampled()
		// The prompt's full pages go to the prefix cache now, not when the
		// sequence ends: a request with the same prefix that comes while
		// this one decodes shares them. They stay this sequence's (it
		// holds references) and only ever get read; it writes on after
		// them.
		e.sched.pool.Insert(s.tokens[:s.kvLen], s.pages)
		e.sample(s)
	}
	return computed
}

// decode feeds the last token of every decoding sequence and samples.
func (e *Engine) decode(decoding []*sequence) {
	stepped := false
	for _, s := range decoding {
		if s.state != seqRunning || !s.decoding {
			continue // preempted by an earlier sequence's reservation
		}
		if !e.sched.reserve(s, s.kvLen+1) {
			continue
		}
		if !stepped {
			stepped = true
			e.slowDown(-1)
		}
		e.forward(s, true)
		e.timed.decoded(s.kvLen)
		e.stats.decodeTokens++
		e.sample(s)
	}
}

// forward runs the model on the next position of s.
func (e *Engine) forward(s *sequence, wantLogits bool) {
	if e.timed != nil {
		e.forwardTimed(s)
		return
	}
	var logits []float32
	if wantLogits {
		logits = e.logits
	}
	e.model.Forward(e.sched.pool.KV, s.slots[:s.kvLen+1], s.tokens[s.kvLen], e.scratch, logits)
	s.kvLen++
}
