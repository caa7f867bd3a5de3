package builtin

import (
	"cmp"
	"slices"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
)

// scheduler is the built-in engine's batch and the policy of who runs in
// it: the sequences waiting and running, their admission (in order of
// arrival, each once its pages are free), the KV pages each holds, the
// preemption of the latest arrival when pages run out, and how a step's
// prefill budget is shared. Ranking by arrival (the router's first
// arrival of a request, which it sends on every attempt) rather than by
// admission is what keeps preemption from livelocking: a request the
// router resumes after a preemption is not the next victim, and goes
// before those that came after it, so the oldest request always
// progresses (vLLM's recompute preemption ranks the same way). MLC's
// engine preempts the most recently admitted, and a resumed request is
// that one. It belongs to the scheduler goroutine
// (Engine.Run); the Engine runs the model on what it schedules (step.go)
// and ends the requests.
type scheduler struct {
	pool       *kvcache.Pool
	waiting    []*sequence
	running    []*sequence
	admitSeq   uint64
	maxRunning int // max_num_sequence
	chunk      int // prefill_chunk_size: a step's prompt positions at most
	// endPreempted, when not nil, ends a preempted sequence instead of
	// queueing it to resume (disaggregation: the router retries it).
	endPreempted func(s *sequence)
	logf         func(format string, args ...any)
	preemptions  int64
}

// queue puts s among the waiting sequences, after those that arrived no
// later than it.
func (sc *scheduler) queue(s *sequence) {
	s.state = seqWaiting
	i := len(sc.waiting)
	for i > 0 && sc.waiting[i-1].req.arrival > s.req.arrival {
		i--
	}
	sc.waiting = slices.Insert(sc.waiting, i, s)
}

// admissible returns the index in the queue of the next waiting sequence
// that can start now, or -1. A sequence that already holds pages (from
// prep_recv) always may, ahead of any other: it gets more by preemption if
// need be, so held pages never block the engine. Others go in order, and
// need their pages free plus one per running sequence to grow.
func (sc *scheduler) admissible() int {
	if len(sc.running) >= sc.maxRunning {
		return -1
	}
	blocked := false
	for i, s := range sc.waiting {
		switch {
		case len(s.pages) > 0:
			return i
		case !blocked && sc.fits(pagesFor(s.target())):
			return i
		}
		blocked = true
	}
	return -1
}

// fits reports whether need more pages can be handed out while leaving one
// for every running sequence.
func (sc *scheduler) fits(need int) bool {
	return need+len(sc.running) <= sc.pool.Available()
}

// admit moves waiting sequences to running, reporting whether it moved
// any.
func (sc *scheduler) admit() bool {
	admitted := false
	for i := sc.admissible(); i >= 0; i = sc.admissible() {
		admitted = true
		s := sc.waiting[i]
		sc.waiting = slices.Delete(sc.waiting, i, i+1)
		if len(s.pages) == 0 && s.kvLen == 0 {
			sc.matchPrefix(s)
		}
		sc.admitSeq++
		s.admitted = sc.admitSeq
		s.state = seqRunning
		sc.running = append(sc.running, s)
	}
	return admitted
}

// matchPrefix starts s from the prefix cache (at most matchLimit).
func (sc *scheduler) matchPrefix(s *sequence) {
	pages, matched := sc.pool.Match(s.tokens, s.matchLimit())
	s.setPages(pages)
	s.kvLen = matched
	s.fresh = true
	if s.index == 0 && s.generated == 0 {
		s.req.prefixMatched = matched
	}
}

// rematch starts s from the prefix cache again, as it is about to compute
// its first position, when the cache now holds more of it than at its
// admission: a long prompt admitted beside another with the same head
// waits its turn (prefillShares) and then shares the head that one
// computed, instead of computing it again.
func (sc *scheduler) rematch(s *sequence) {
	s.fresh = false
	pages, matched := sc.pool.Match(s.tokens, s.matchLimit())
	if matched <= s.kvLen {
		sc.pool.ReleaseAll(pages)
		return
	}
	sc.pool.ReleaseAll(s.pages)
	s.setPages(pages)
	s.kvLen = matched
	if s.index == 0 && s.generated == 0 {
		s.req.prefixMatched = matched
	}
}

// prefilling returns the running sequences that have not started
// decoding, and the positions each may compute this step (prefillShares).
// A compute-only sequence whose window the prefix cache held whole is
// among them with nothing to compute: it still has to finish.
func (sc *scheduler) prefilling() ([]*sequence, []int) {
	var pending []*sequence
	for _, s := range sc.running {
		if s.state == seqRunning && !s.decoding {
			pending = append(pending, s)
		}
	}
	return pending, prefillShares(pending, sc.chunk)
}

// prefillShares divides a step's budget of prompt positions among the
// sequences still prefilling. A prompt that can finish within one budget
// is short, any other long. The short ones come first, by water-filling:
// each gets what it has left or an equal share of what remains, the
// smallest asks served first, so that a short prompt that comes while
// long ones prefill gets its first token within a step or two. The long
// ones get what the short ones leave, and never less than
// budget/longPrefillShare while any is waiting (a stream of short prompts
// never starves them), in the order they were admitted: one long prefill
// at a time finishes sooner than several abreast, and each step computes
// fewer deep positions. (vLLM's long_prefill_token_threshold and
// max_long_partial_prefills make the same trade.) shares[i] is seqs[i]'s.
func prefillShares(seqs []*sequence, budget int) []int {
	shares := make([]int, len(seqs))
	left := func(i int) int { return seqs[i].target() - seqs[i].kvLen }
	var short, long []int
	for i := range seqs {
		if left(i) <= budget {
			short = append(short, i)
		} else {
			long = append(long, i)
		}
	}
	shortBudget := budget
	if len(long) > 0 {
		shortBudget -= max(budget/longPrefillShare, 1)
	}
	slices.SortStableFunc(short, func(a, b int) int { return left(a) - left(b) })
	for k, i := range short {
		if shortBudget <= 0 {
			break
		}
		n := min(left(i), max(shortBudget/(len(short)-k), 1))
		shares[i] = n
		shortBudget -= n
		budget -= n
	}
	slices.SortStableFunc(long, func(a, b int) int { return cmp.Compare(seqs[a].admitted, seqs[b].admitted) })
	for _, i := range long {
		if budget <= 0 {
			break
		}
		n := min(left(i), budget)
		shares[i] = n
		budget -= n
	}
	return shares
}

// longPrefillShare sets the least part of a step's prefill budget that
// long prompts get while short ones wait: an eighth.
const longPrefillShare = 8

// decoding returns the running sequences that decode, as the step
// begins.
func (sc *scheduler) decoding() []*sequence {
	var out []*sequence
	for _, s := range sc.running {
		if s.state == seqRunning && s.decoding {
			out = append(out, s)
		}
	}
	return out
}

// reserve gives s pages for positions [0, upto), evicting cached pages
// and then preempting the running sequence of the latest arrival as
// needed. It reports false when s itself had to go or nothing could.
func (sc *scheduler) reserve(s *sequence, upto int) bool {
	for len(s.slots) < upto {
		if page, ok := sc.pool.Alloc(); ok {
			s.addPage(page)
			continue
		}
		v := sc.victim()
		if v == nil {
			return false
		}
		sc.preempt(v)
		if v == s {
			return false
		}
	}
	return true
}

// victim is the running sequence of the latest arrival (of those, the
// most recently admitted).
func (sc *scheduler) victim() *sequence {
	var v *sequence
	for _, s := range sc.running {
		if v == nil || cmp.Or(cmp.Compare(s.req.arrival, v.req.arrival), cmp.Compare(s.admitted, v.admitted)) > 0 {
			v = s
		}
	}
	return v
}

// preempt evicts s's KV cache. In disaggregation mode s ends with
// finish_reason "preempt" (the router retries it); otherwise it waits,
// ahead of every later arrival, and resumes from its prompt and
// generated tokens.
func (sc *scheduler) preempt(s *sequence) {
	sc.preemptions++
	sc.logf("preempt request %s choice %d at %d tokens", s.req.id, s.index, len(s.tokens))
	if sc.endPreempted != nil {
		sc.endPreempted(s)
		return
	}
	sc.dropPages(s)
	sc.removeRunning(s)
	s.decoding = false
	sc.queue(s)
}

// dropPages offers s's computed pages to the prefix cache and releases
// them.
func (sc *scheduler) dropPages(s *sequence) {
	sc.pool.Insert(s.tokens[:min(s.kvLen, len(s.tokens))], s.pages)
	sc.pool.ReleaseAll(s.pages)
	s.pages, s.slots, s.kvLen = nil, nil, 0
}

func (sc *scheduler) removeRunning(s *sequence) {
	sc.running = slices.DeleteFunc(sc.running, func(r *sequence) bool { return r == s })
}

func (sc *scheduler) removeWaiting(s *sequence) {
	sc.waiting = slices.DeleteFunc(sc.waiting, func(r *sequence) bool { return r == s })
}
