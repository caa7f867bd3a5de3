package builtin

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The scheduler side of disaggregated serving: prep_recv reservations, KV
// received from a prefill engine, and the start of generation on them.

// prepWait is a prep_recv waiting for KV pages.
type prepWait struct {
	user   string
	tokens []int
	end    int
	seq    *sequence       // the reservation, once made
	done   chan prepResult // buffered; receives one result
}

// prepResult is a prep_recv's answer.
type prepResult struct {
	meta    protocol.KVAppendMetadata
	matched int
	err     *protocol.Error
}

// queuePrepRecv replaces any reservation of the same user and queues w
// behind earlier prep_recvs; it is served as soon as free or evictable
// pages allow, without preempting running sequences (scheduler goroutine).
func (e *Engine) queuePrepRecv(w *prepWait) {
	if _, ok := e.released[w.user]; ok {
		w.done <- prepResult{err: protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeInvalidRequest,
			"prep_recv of user %q was released before it arrived", w.user).WithCode(codeReleased)}
		return
	}
	if _, ok := e.prepared[w.user]; ok {
		e.dropPrepared(w.user)
	}
	e.pendingPrep = append(e.pendingPrep, w)
	e.servePrepRecvs()
}

// servePrepRecvs makes the queued reservations that fit, in order,
// reporting whether it made any.
func (e *Engine) servePrepRecvs() bool {
	served := false
	for len(e.pendingPrep) > 0 && e.tryPrepRecv(e.pendingPrep[0]) {
		e.pendingPrep = e.pendingPrep[1:]
		served = true
	}
	return served
}

// tryPrepRecv matches w's prompt against the prefix cache and reserves
// pages for the rest of [0, end), reporting false when pages are short.
func (e *Engine) tryPrepRecv(w *prepWait) bool {
	s := &sequence{tokens: w.tokens, user: w.user, state: seqPrepared, windowEnd: w.end}
	pages, matched := e.sched.pool.Match(w.tokens, min(w.end, len(w.tokens)-1))
	if !e.sched.fits(pagesFor(w.end) - len(pages)) {
		e.sched.pool.ReleaseAll(pages)
		return false
	}
	s.setPages(pages)
	s.matched, s.kvLen = matched, matched
	for len(s.slots) < w.end {
		page, ok := e.sched.pool.Alloc()
		if !ok { // fits promised more than Alloc gives: try again later
			e.sched.pool.ReleaseAll(s.pages)
			return false
		}
		s.addPage(page)
	}
	s.present = make([]bool, w.end)
	s.deadline = time.Now().Add(e.opts.Overrides.PrepRecvTimeout)
	if _, ok := e.prepared[w.user]; ok {
		e.dropPrepared(w.user) // an earlier prep_recv of the same user, served since
	}
	e.prepared[w.user] = s
	w.seq = s
	w.done <- prepResult{meta: protocol.KVAppendMetadata{segments(s.slots[matched:w.end])}, matched: matched}
	return true
}

// cancelPrepRecv withdraws a prep_recv whose client went away.
func (e *Engine) cancelPrepRecv(w *prepWait) {
	e.pendingPrep = slices.DeleteFunc(e.pendingPrep, func(p *prepWait) bool { return p == w })
	if w.seq != nil && e.prepared[w.user] == w.seq {
		e.dropPrepared(w.user)
	}
}

// segments groups slots into runs of consecutive slots.
func segments(slots []int) []protocol.KVSegment {
	segs := []protocol.KVSegment{}
	for _, slot := range slots {
		if n := len(segs); n > 0 && segs[n-1].Start+segs[n-1].Length == slot {
			segs[n-1].Length++
			continue
		}
		segs = append(segs, protocol.KVSegment{Start: slot, Length: 1})
	}
	return segs
}

// receiveKV writes transferred keys and values for positions
// [begin, begin+len(slots)) of user's reservation, after checking that
// every slot is the reservation's own slot for its position. Nothing is
// written when a check fails (scheduler goroutine).
func (e *Engine) receiveKV(t *transfer) *protocol.Error {
	s := e.prepared[t.user]
	if s == nil {
		return protocol.InvalidRequest("user", "no prep_recv reservation for user %q", t.user)
	}
	for j, slot := range t.slots {
		pos := t.begin + j
		if pos < s.matched || pos >= s.windowEnd || s.slots[pos] != slot {
			return protocol.InvalidRequest("kv_addr_info", "KV slot %d (token %d) is not reserved for user %q", slot, pos, t.user)
		}
	}
	pool := e.sched.pool
	d := pool.Dim()
	off := 0
	for j, slot := range t.slots {
		if pool.Chain != nil {
			pool.Chain[slot] = binary.LittleEndian.Uint64(t.data[off:])
			off += 8
		}
		for l := range pool.KV.K {
			off = decodeFloats(pool.KV.K[l][slot*d:(slot+1)*d], t.data, off)
			off = decodeFloats(pool.KV.V[l][slot*d:(slot+1)*d], t.data, off)
		}
		s.present[t.begin+j] = true
	}
	return nil
}

// attachPrepared turns user's reservation into the sequence of request r,
// whose generation starts at begin. Without a reservation, begin must be
// 0 (scheduler goroutine).
func (e *Engine) attachPrepared(r *request, user string, begin int) *protocol.Error {
	s := e.prepared[user]
	if s == nil {
		if begin > 0 {
			return protocol.InvalidRequest("begin", "the KV of tokens [0, %d) is not present: no prep_recv for user %q", begin, user)
		}
		return nil
	}
	if !slices.Equal(s.tokens, r.prompt) {
		return protocol.InvalidRequest("prompt", "prompt differs from the one prep_recv reserved for user %q", user)
	}
	if len(r.seqs) != 1 {
		return protocol.InvalidRequest("n", "start_generate supports n = 1 only")
	}
	if missing := s.missing(begin); missing >= 0 {
		return protocol.InvalidRequest("begin", "the KV of token %d (of [0, %d)) has not been received", missing, begin)
	}
	delete(e.prepared, user)
	seq := r.seqs[0]
	seq.setPages(s.pages)
	seq.kvLen = min(max(begin, s.matched), len(r.prompt)-1)
	r.prefixMatched = s.matched
	return nil
}

// missing returns the first position below begin whose KV is absent, or -1.
func (s *sequence) missing(begin int) int {
	for pos := s.matched; pos < begin; pos++ {
		if pos >= s.windowEnd || !s.present[pos] {
			return pos
		}
	}
	return -1
}

// gatherKV encodes the keys and values of positions [begin, end) of s:
// per position, per layer, the key then the value, float32 little-endian;
// a timed engine's, one word a position (see kvShape).
func (e *Engine) gatherKV(s *sequence, begin, end int) []byte {
	pool := e.sched.pool
	d := pool.Dim()
	layers := len(pool.KV.K)
	buf := make([]byte, 0, (end-begin)*max(layers*2*d*4, 8))
	for pos := begin; pos < end; pos++ {
		slot := s.slots[pos]
		if pool.Chain != nil {
			buf = binary.LittleEndian.AppendUint64(buf, pool.Chain[slot])
		}
		for l := range layers {
			buf = appendFloats(buf, pool.KV.K[l][slot*d:(slot+1)*d])
			buf = appendFloats(buf, pool.KV.V[l][slot*d:(slot+1)*d])
		}
	}
	return buf
}

func appendFloats(buf []byte, v []float32) []byte {
	for _, f := range v {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
	}
	return buf
}

func decodeFloats(dst []float32, data []byte, off int) int {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		off += 4
	}
	return off
}
