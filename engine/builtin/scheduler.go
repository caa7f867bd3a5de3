package builtin

import (
	"slices"
	"time"
)

// step is one scheduler iteration: admit the waiting sequences and make
// the prep_recv reservations that pages allow, prefill up to
// prefill_chunk_size prompt tokens, then decode one token of every running
// sequence. It reports whether it made progress; a running sequence always
// makes some (it computes, or is preempted).
func (e *Engine) step() bool {
	admitted := e.admit()
	served := e.servePrepRecvs()
	e.blocked = len(e.waiting) + len(e.pendingPrep)
	progress := admitted || served || len(e.running) > 0
	e.prefill()
	e.decode()
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

// admissible returns the index in the queue of the next waiting sequence
// that can start now, or -1. A sequence that already holds pages (from
// prep_recv) always may, ahead of any other: it gets more by preemption if
// need be, so held pages never block the engine. Others go in order, and
// need their pages free plus one per running sequence to grow.
func (e *Engine) admissible() int {
	if len(e.running) >= e.opts.Overrides.MaxNumSequence {
		return -1
	}
	blocked := false
	for i, s := range e.waiting {
		switch {
		case len(s.pages) > 0:
			return i
		case !blocked && e.fits(pagesFor(s.target())):
			return i
		}
		blocked = true
	}
	return -1
}

// fits reports whether need more pages can be handed out while leaving one
// for every running sequence.
func (e *Engine) fits(need int) bool {
	return need+len(e.running) <= e.pool.Available()
}

// admit moves waiting sequences to running, reporting whether it moved
// any.
func (e *Engine) admit() bool {
	admitted := false
	for i := e.admissible(); i >= 0; i = e.admissible() {
		admitted = true
		s := e.waiting[i]
		e.waiting = slices.Delete(e.waiting, i, i+1)
		if len(s.pages) == 0 && s.kvLen == 0 {
			e.matchPrefix(s)
		}
		e.admitSeq++
		s.admitted = e.admitSeq
		s.state = seqRunning
		e.running = append(e.running, s)
	}
	return admitted
}

// matchPrefix starts s from the prefix cache. A sampling sequence always
// computes its last token itself, for the logits.
func (e *Engine) matchPrefix(s *sequence) {
	limit := s.target() - 1
	if s.req.computeOnly {
		limit = s.target()
	}
	pages, matched := e.pool.Match(s.tokens, limit)
	s.setPages(pages)
	s.kvLen = matched
	if s.index == 0 && s.generated == 0 {
		s.req.prefixMatched = matched
	}
}

// prefill computes prompt positions of sequences that have not started
// decoding, up to prefill_chunk_size positions in all, shared among them
// (see prefillShares): a short prompt that comes while a long one
// prefills gets its first token within a step or two instead of waiting
// for the long one's last chunk. However a prompt is chunked, its
// positions are computed in order, so its text is the same.
func (e *Engine) prefill() {
	var pending []*sequence
	for _, s := range e.running {
		if s.state == seqRunning && !s.decoding && s.kvLen < s.target() {
			pending = append(pending, s)
		}
	}
	for i, n := range prefillShares(pending, e.opts.Overrides.PrefillChunkSize) {
		s := pending[i]
		if n == 0 || s.state != seqRunning {
			continue // preempted by an earlier sequence's reservation
		}
		if !e.reserve(s, s.kvLen+n) {
			continue
		}
		e.slowDown(n)
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
		// The prompt's full pages go to the prefix cache now, not when the
		// sequence ends: a request with the same prefix that comes while
		// this one decodes shares them. They stay this sequence's (it
		// holds references) and only ever get read; it writes on after
		// them.
		e.pool.Insert(s.tokens[:s.kvLen], s.pages)
		e.sample(s)
	}
}

// prefillShares divides a step's budget of prompt positions among the
// sequences still prefilling, by water-filling: each gets what it has
// left or an equal share of what remains, the smallest asks served
// first, so that what a short prompt does not need goes to the longer
// ones. Every sequence gets at least budget/len(seqs) (a long prompt is
// never starved by a stream of short ones), and a prompt shorter than
// that finishes its prefill in this step. shares[i] is seqs[i]'s.
func prefillShares(seqs []*sequence, budget int) []int {
	shares := make([]int, len(seqs))
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	left := func(i int) int { return seqs[i].target() - seqs[i].kvLen }
	slices.SortStableFunc(order, func(a, b int) int { return left(a) - left(b) })
	for k, i := range order {
		if budget <= 0 {
			break
		}
		n := min(left(i), max(budget/(len(order)-k), 1))
		shares[i] = n
		budget -= n
	}
	return shares
}

// decode feeds the last token of every decoding sequence and samples.
func (e *Engine) decode() {
	stepped := false
	for _, s := range slices.Clone(e.running) {
		if s.state != seqRunning || !s.decoding {
			continue
		}
		if !e.reserve(s, s.kvLen+1) {
			continue
		}
		if !stepped {
			stepped = true
			e.slowDown(-1)
		}
		e.forward(s, true)
		e.stats.decodeTokens++
		e.sample(s)
	}
}

// forward runs the model on the next position of s.
func (e *Engine) forward(s *sequence, wantLogits bool) {
	var logits []float32
	if wantLogits {
		logits = e.logits
	}
	e.model.Forward(e.pool.KV, s.slots[:s.kvLen+1], s.tokens[s.kvLen], e.scratch, logits)
	s.kvLen++
}

// reserve gives s pages for positions [0, upto), evicting cached pages
// and then preempting the most recently admitted running sequence as
// needed. It reports false when s itself had to go or nothing could.
func (e *Engine) reserve(s *sequence, upto int) bool {
	for len(s.slots) < upto {
		if page, ok := e.pool.Alloc(); ok {
			s.addPage(page)
			continue
		}
		v := e.victim()
		if v == nil {
			return false
		}
		e.preempt(v)
		if v == s {
			return false
		}
	}
	return true
}

// victim is the most recently admitted running sequence.
func (e *Engine) victim() *sequence {
	var v *sequence
	for _, s := range e.running {
		if v == nil || s.admitted > v.admitted {
			v = s
		}
	}
	return v
}

// preempt evicts s's KV cache. In disaggregation mode s ends with
// finish_reason "preempt" (the router retries it); otherwise it waits at
// the head of the queue and resumes from its prompt and generated tokens.
func (e *Engine) preempt(s *sequence) {
	e.stats.preemptions++
	e.logf("preempt request %s choice %d at %d tokens", s.req.id, s.index, len(s.tokens))
	if e.disagg {
		e.finish(s, finishPreempt)
		return
	}
	e.dropPages(s)
	e.removeRunning(s)
	s.decoding = false
	s.state = seqWaiting
	e.waiting = append([]*sequence{s}, e.waiting...)
}

// dropPages offers s's computed pages to the prefix cache and releases
// them.
func (e *Engine) dropPages(s *sequence) {
	e.pool.Insert(s.tokens[:min(s.kvLen, len(s.tokens))], s.pages)
	e.pool.ReleaseAll(s.pages)
	s.pages, s.slots, s.kvLen = nil, nil, 0
}

func (e *Engine) removeRunning(s *sequence) {
	e.running = slices.DeleteFunc(e.running, func(r *sequence) bool { return r == s })
}

func (e *Engine) removeWaiting(s *sequence) {
	e.waiting = slices.DeleteFunc(e.waiting, func(r *sequence) bool { return r == s })
}
