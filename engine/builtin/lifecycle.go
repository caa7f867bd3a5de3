package builtin

import (
	"encoding/json"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Finish reasons the engine uses besides protocol's.
const (
	finishPreempt = protocol.FinishPreempt
	finishAbort   = "abort" // internal: the request was cancelled
)

// submit queues a request's sequences (scheduler goroutine). A request
// whose prompt leaves no room for a token ends at once, with no text,
// finish reason "length" and a usage of zeros, as MLC's AddRequest
// answers it; a prep_recv reservation it was given is freed with it.
func (e *Engine) submit(r *request) {
	e.active[r] = true
	r.live = len(r.seqs)
	for _, s := range r.seqs {
		e.sched.queue(s)
	}
	if !r.computeOnly && e.noRoom(len(r.prompt)) {
		r.noRoom = true
		for _, s := range r.seqs {
			e.finish(s, protocol.FinishLength)
		}
	}
}

// sample picks the next token of s from e.logits and applies the end
// conditions. A sequence answered by a --replies script takes its next
// token from the script instead, whatever the sampling parameters say,
// and ends with "stop" after the last one, as at EOS.
func (e *Engine) sample(s *sequence) {
	id, scripted := e.scripted(s)
	switch {
	case scripted:
	case e.timed != nil:
		id = e.nextTimed(s)
	default:
		id = e.pick(s)
	}
	s.generated++
	s.req.completionTokens++
	if id < 0 && s.gram != nil && !s.gram.s.CanEnd() {
		// No token of the vocabulary continues the grammar's text: the
		// answer is cut, and says so.
		e.finish(s, protocol.FinishLength)
		return
	}
	if id < 0 || !scripted && e.eos[id] && !s.req.params.ignoreEOS {
		e.finish(s, protocol.FinishStop)
		return
	}
	var lp *tokenLogprob
	if s.req.params.logprobs {
		lp = e.logprobOf(e.logits, id, s.req.params.topLogprobs) // e.logits as pick adjusted them
	}
	s.tokens = append(s.tokens, id)
	if s.gram != nil && !scripted {
		s.gram.advance(id)
	}
	p, stopped := s.out.push(id, lp)
	e.send(s, p, "")
	switch {
	case stopped:
		e.finish(s, protocol.FinishStop)
	case s.req.params.maxTokens >= 0 && s.generated >= s.req.params.maxTokens, len(s.tokens) >= e.maxSeq:
		e.finish(s, protocol.FinishLength)
	}
}

// scripted returns the next token of s's --replies script, -1 at its
// end, and whether s follows one. The script is chosen at the first
// sample of the request, from its prompt, once for all its sequences.
func (e *Engine) scripted(s *sequence) (int, bool) {
	if !s.scriptChosen {
		s.scriptChosen = true
		r := s.req
		if !r.replyChosen {
			r.replyChosen = true
			r.reply = e.chooseReply(s.tokens)
		}
		if r.reply != nil {
			s.scripted, s.script = true, r.reply.ids
		}
	}
	if !s.scripted {
		return 0, false
	}
	if len(s.script) == 0 {
		return -1, true
	}
	id := s.script[0]
	s.script = s.script[1:]
	return id, true
}

// send gives s's handler a piece of text, with the finish reason that ends
// it, if any. An empty piece is sent only with a finish reason.
func (e *Engine) send(s *sequence, p piece, finish string) {
	if p.text == "" && len(p.logprobs) == 0 && finish == "" {
		return
	}
	ev := event{choice: s.index, text: p.text, logprobs: p.logprobs, finish: finish}
	if !s.req.announced {
		s.req.announced = true
		ev.first, ev.matched = true, s.req.prefixMatched
	}
	e.emit(s.req.events, ev)
}

// finish ends s: its pages go to the prefix cache or back to the pool, its
// handler gets the rest of its text and the finish reason, and the request
// ends with its last sequence.
func (e *Engine) finish(s *sequence, reason string) {
	switch s.state {
	case seqRunning:
		e.sched.removeRunning(s)
	case seqWaiting:
		e.sched.removeWaiting(s)
	case seqDone:
		return
	}
	e.sched.dropPages(s)
	s.state = seqDone
	r := s.req
	if reason != finishAbort {
		e.send(s, s.out.flush(), reason) // held-back text and its logprobs, even when preempted
	}
	r.live--
	if r.live == 0 {
		e.endRequest(r, nil, false)
	}
}

// endRequest sends the request's last event.
func (e *Engine) endRequest(r *request, payload []byte, aborted bool) {
	delete(e.active, r)
	if !aborted {
		e.stats.reusedTokens += int64(r.prefixMatched)
	}
	e.logf("request %s done: %d prompt tokens (%d from the prefix cache), %d generated", r.id, len(r.prompt), r.prefixMatched, r.completionTokens)
	e.emit(r.events, event{done: true, usage: e.usage(r), payload: payload, aborted: aborted})
}

// usage counts a request's tokens; extra carries the prefix match and,
// as caddy-mlc's extension, the engine's load as the request ends (see
// protocol.SpecialQueryEngineMetrics): a router that reads it need not
// poll an engine whose requests end often.
func (e *Engine) usage(r *request) *protocol.Usage {
	u := &protocol.Usage{
		PromptTokens:     len(r.prompt),
		CompletionTokens: r.completionTokens,
		TotalTokens:      len(r.prompt) + r.completionTokens,
	}
	if r.noRoom {
		u = &protocol.Usage{} // MLC's StreamBackError counts nothing
	}
	u.Extra = e.snapshot().loadExtra()
	u.Extra[protocol.ExtraPrefixMatchedLength] = jsonInt(r.prefixMatched)
	u.Extra["prompt_length"] = jsonInt(len(r.prompt))
	return u
}

func jsonInt(n int) json.RawMessage {
	b, _ := json.Marshal(n)
	return b
}

// finishCompute ends a computeOnly sequence: the keys and values of
// [sendBegin, end) become the request's payload.
func (e *Engine) finishCompute(s *sequence) {
	payload := e.gatherKV(s, s.req.sendBegin, s.kvLen)
	e.sched.removeRunning(s)
	e.sched.dropPages(s)
	s.state = seqDone
	e.endRequest(s.req, payload, false)
}

// abort cancels a request whose client went away, freeing its pages.
func (e *Engine) abort(r *request) {
	if !e.active[r] {
		return
	}
	e.logf("request %s aborted: the client went away", r.id)
	for _, s := range r.seqs {
		if s.state != seqDone {
			e.finish(s, finishAbort)
		}
	}
	delete(e.active, r)
}

// abortAll ends every request and reservation as the engine stops; their
// handlers end their responses cleanly.
func (e *Engine) abortAll() {
	for r := range e.active {
		for _, s := range r.seqs {
			if s.state != seqDone {
				s.state = seqDone
				e.sched.removeRunning(s)
				e.sched.removeWaiting(s)
				e.sched.dropPages(s)
			}
		}
		e.endRequest(r, nil, true)
	}
	for user := range e.prepared {
		e.dropPrepared(user)
	}
	for _, w := range e.pendingPrep {
		w.done <- prepResult{err: unavailable(errStopped)}
	}
	e.pendingPrep = nil
}

// expire reclaims prep_recv reservations whose start_generate never came,
// and forgets releases older than a reservation could live.
func (e *Engine) expire(now time.Time) {
	for user, s := range e.prepared {
		if now.After(s.deadline) {
			e.logf("prep_recv of %q expired; %d pages reclaimed", user, len(s.pages))
			e.dropPrepared(user)
		}
	}
	for user, until := range e.released {
		if now.After(until) {
			delete(e.released, user)
		}
	}
}

// dropPrepared frees a prep_recv reservation.
func (e *Engine) dropPrepared(user string) {
	s := e.prepared[user]
	delete(e.prepared, user)
	e.sched.pool.ReleaseAll(s.pages)
	s.pages, s.slots = nil, nil
	s.state = seqDone
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
