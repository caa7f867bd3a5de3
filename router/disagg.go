package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// remoteSendTries bounds the remote_sends of one attempt that a prefill
// engine may preempt (KV memory pressure) before the decode engine
// prefills the request itself.
const remoteSendTries = 3

// DefaultMaxPrefillQueue is the calls a prefill engine may have in flight
// before the decode engine prefills a request itself (see
// Router.MaxPrefillQueue). Two keep a prefill engine busy between calls
// (one computing, one waiting) without queueing a prompt behind more than
// one other.
const DefaultMaxPrefillQueue = 2

// disagg is MLC's disaggregated flow: prep_recv on the decode engine,
// remote_send on a prefill engine (when the decode engine's prefix cache
// does not already hold the window), start_generate on the decode engine.
//
// The order is chosen so that a failure holds nothing for long: the
// prefill engine is chosen before the decode engine reserves anything,
// and every way out between prep_recv and a started generation gives the
// reservation back (see releaseReservation). Without a usable prefill
// engine (none ready, or its remote_send failed) the decode engine serves
// the whole request: slower for its other streams, but never a stall.
// Without a decode engine with room, a prefill engine with room serves
// it whole (decodeshort.go).
type disagg struct {
	r               *Router
	balance         float64
	maxPrefillQueue int // -1: never prefill locally for a busy prefill engine
}

// windowEnd is the end of the KV window the prefill engine computes, as
// MLC's router sets it: -1 (all of the prompt but its last token) when the
// balance factor is 0, else the first (1-factor) of the prompt.
func (d *disagg) windowEnd(promptLen int) int {
	if math.Abs(d.balance) < 1e-5 {
		return -1
	}
	return int((1 - d.balance) * float64(promptLen))
}

func (d *disagg) generatingRole() string { return engine.RoleDecode }

func (d *disagg) roles(eps []engine.Endpoint) map[string][]int {
	roles := allEndpoints(len(eps))
	roles[engine.RolePrefill], roles[engine.RoleDecode], _ = SplitRoles(eps)
	return roles
}

func (d *disagg) start(ctx context.Context, whole *protocol.CompletionRequest, avoid map[string]bool) (a *attempt, err error) {
	req := microservingRequest(whole)
	q := d.r.newRequest(ctx, req)
	// dec generates: a decode engine, or a prefill engine when short.
	dec, short, err := d.decodeEngine(ctx, pickOptions{avoid: avoid, req: q, needPages: pagesFor(len(q.Prompt))}, whole)
	if err != nil {
		return nil, err
	}
	defer func() {
		if a == nil {
			dec.release(err)
		}
	}()
	dec.routed() // every way on calls it: prep_recv, or a completion
	ctx = dec.bind(ctx)
	var w window
	local := short
	if local == "" {
		if w, local, err = d.prepare(ctx, dec, q, req, avoid); err != nil {
			return nil, err
		}
	}
	if local != "" {
		d.r.metrics.localPrefills.WithLabelValues(local).Inc()
		lctx := d.r.planPrefill(ctx, dec.Upstream, d.r.readsLatency, dec.uncached(len(q.Prompt)))
		return startAttempt(lctx, d.r.client, dec, protocol.PathCompletions, localRequest(whole), req.Stream)
	}
	gen := protocol.StartGenerateRequest{CompletionRequest: *req, Begin: w.end}
	t0 := time.Now()
	gctx := d.r.planPrefill(ctx, dec.Upstream, d.r.readsLatency, len(q.Prompt)-w.end)
	if a, err = startAttempt(gctx, d.r.client, dec, protocol.PathStartGenerate, gen, req.Stream); err != nil {
		// The engine may have started the generation, which holds the
		// reservation now: only the release extension is safe.
		d.releaseUnknown(dec, req)
		return nil, err
	}
	a.cached, a.expected = w.cached, w.expected
	if req.Stream {
		d.r.metrics.steps.WithLabelValues("start_generate").Observe(time.Since(t0).Seconds())
	}
	return a, nil
}

// window is the part of a prompt a disaggregated attempt sent from a
// prefill engine to its decode engine: [0, end), of which cached tokens
// no engine computed (see reusedInWindow), where the router expected
// expected (cacheaccount.go; -1: it did not account).
type window struct{ end, cached, expected int }

// prepare has the decode engine reserve the KV of the prompt's window
// (prep_recv) and a prefill engine compute it (remote_send), which it
// holds for that call only. It returns the window; or local, why the
// decode engine is to prefill the request itself instead (a reason of
// caddy_mlc_local_prefills_total); or the error that ends the attempt.
func (d *disagg) prepare(ctx context.Context, dec *lease, q *Request, req *protocol.CompletionRequest, avoid map[string]bool) (w window, local string, err error) {
	n := len(q.Prompt)
	prep := protocol.PrepRecvRequest{CompletionRequest: *req, End: d.windowEnd(n)}
	// The response format stays: MLC's start_generation generates under
	// the config of the request its prep_recv added (engine.cc
	// HandleDisaggRequest), whose format its grammar is compiled from; the
	// built-in engine reads start_generate's, which carries it too.
	prep.Stream, prep.StreamOptions = false, nil
	end := protocol.ResolveIndex(prep.End, n)
	if end <= 0 {
		return window{}, "empty_window", nil
	}
	if dec.pe.Load() < 0 {
		return window{}, "unknown_pe", nil
	}
	pre := d.r.pick(engine.RolePrefill, pickOptions{avoid: avoid, req: q, exclude: dec.Upstream, noBroken: true})
	if pre == nil {
		return window{}, "no_prefill_engine", nil
	}
	var sendErr error
	defer func() { pre.release(sendErr) }()
	if d.prefillBusy(pre, dec, q, n) {
		return window{}, "prefill_busy", nil // pre is never routed
	}
	recv, err := d.prepRecv(ctx, dec, req, prep, end)
	if err != nil {
		return window{}, "", err
	}
	dec.matched(recv.PrefixMatchedLength)
	if recv.PrefixMatchedLength == end {
		return window{end, end, dec.expectedCached()}, "", nil // the decode engine's prefix cache holds the window
	}
	pre.routed()
	sctx := d.r.planPrefill(pre.bind(ctx), pre.Upstream, d.r.readsLatency, pre.uncached(end), dec.url)
	var ack *protocol.Usage
	if ack, sendErr = d.remoteSend(sctx, pre, dec, req, recv, end); sendErr == nil {
		pre.finish(ack) // what it reused of its own cache corrects its index
		return window{end, reusedInWindow(recv.PrefixMatchedLength, ack, end), expectedInWindow(dec, pre, ack, end)}, "", nil
	}
	d.releaseReservation(dec, req, end)
	if ctx.Err() != nil {
		return window{}, "", context.Cause(ctx)
	}
	if err := d.decodeAtFault(pre, dec, sendErr); err != nil {
		return window{}, "", err
	}
	d.r.logger.Debug("remote_send failed; the decode engine prefills the request itself",
		zap.String("user", userOf(req)), addrField(pre.Upstream), zap.Error(sendErr))
	return window{}, "remote_send_failed", nil
}

// prepRecv has the decode engine reserve the KV of the window [0, end)
// (prep_recv), and returns its answer: how much of the window its prefix
// cache holds, and where the rest is to be written. On error it leaves no
// reservation held.
func (d *disagg) prepRecv(ctx context.Context, dec *lease, req *protocol.CompletionRequest, prep protocol.PrepRecvRequest, end int) (protocol.PrepRecvResponse, error) {
	var recv protocol.PrepRecvResponse
	t0 := time.Now()
	// The prep_recv is waited for even when the client leaves: an engine
	// may serve it all the same (MLC's does, and aborting its request
	// then frees nothing of the reservation), and a reservation the
	// router knows of is one it can give back.
	err := d.r.client.post(context.WithoutCancel(ctx), &dec.proc, protocol.PathPrepRecv, prep, &recv)
	dec.judge(err)
	switch {
	case err != nil:
		d.releaseUnknown(dec, req)
		return recv, err
	case ctx.Err() != nil:
		d.releaseReservation(dec, req, end)
		return recv, context.Cause(ctx)
	case recv.PrefixMatchedLength > end || recv.PrefixMatchedLength < 0:
		d.releaseReservation(dec, req, end)
		return recv, &engineError{op: "prep_recv", addr: dec.addr, proc: dec.procKey(), retry: true,
			err: fmt.Errorf("prefix_matched_length %d outside the window [0, %d]", recv.PrefixMatchedLength, end)}
	}
	d.r.metrics.steps.WithLabelValues("prep_recv").Observe(time.Since(t0).Seconds())
	return recv, nil
}

// microservingRequest is req as a microserving call carries it: with a
// debug config, empty. MLC's entrypoints write their disagg_config into
// the request's debug_config, which a request without one does not have
// (a 500 on every call); MLC's own router adds an empty one too.
func microservingRequest(req *protocol.CompletionRequest) *protocol.CompletionRequest {
	c := *req
	c.DebugConfig = &protocol.DebugConfig{}
	return &c
}

// prefillBusy reports that the least loaded prefill engine, pre, already
// has maxPrefillQueue calls in flight besides this one while the decode
// engine has room for a prompt of n tokens: the prompt would wait longer
// there than the decode engine takes to prefill it between its steps.
// This is conditional disaggregation as NVIDIA Dynamo's router does it;
// MLC's router always disaggregates (max_prefill_queue off). For a
// request with a time-to-first-token target, under a policy that reads
// the latency models, the models decide instead where both can say:
// the decode engine prefills when it is predicted to be first sooner.
func (d *disagg) prefillBusy(pre, dec *lease, q *Request, n int) bool {
	now := time.Now()
	if d.r.readsLatency && q.Targets.TTFT > 0 {
		local, _, _ := dec.predict(now, n)
		remote, _, _ := pre.predict(now, n)
		if local > 0 && remote > 0 && !dec.saturated(now, pagesFor(n)) {
			return local < remote
		}
	}
	if d.maxPrefillQueue < 0 {
		return false
	}
	return pre.calls(now)-1 >= float64(d.maxPrefillQueue) && !dec.saturated(now, pagesFor(n))
}

// remoteSend has the prefill engine compute the window [matched, end) and
// write its KV into the decode engine. A prefill engine that preempts the
// computation (KV memory pressure) is asked again after a short backoff;
// that is a preemption, not a failure of the engine. It returns the
// prefill engine's usage: what it reused of the window from its own
// prefix cache, when it says (the built-in engine's
// prefix_matched_length).
//
// The call is MLC's remote_send made as the completion its entrypoint
// makes of it (protocol.RemoteSendRequest.Completion), to
// /v1/completions: the entrypoint answers {} even for a send the engine
// preempted, and decoding would then run on KV nobody wrote; the
// completion's finish_reason "preempt" tells (the built-in engine answers
// a 503 preempt instead).
func (d *disagg) remoteSend(ctx context.Context, pre, dec *lease, req *protocol.CompletionRequest, recv protocol.PrepRecvResponse, end int) (*protocol.Usage, error) {
	send := protocol.RemoteSendRequest{
		CompletionRequest: *req,
		Begin:             recv.PrefixMatchedLength,
		End:               end,
		KVAddrInfo:        recv.KVAppendMetadata,
		RecvRank:          int(dec.pe.Load()),
	}.Completion()
	send.ResponseFormat = nil // the prefill samples nothing; the decode engine's calls carry the format
	for try := 1; ; try++ {
		var ack protocol.CompletionResponse
		t0 := time.Now()
		err := d.r.client.post(withCallName(ctx, "remote_send"), &pre.proc, protocol.PathCompletions, send, &ack)
		pre.judge(err)
		if err == nil && preempted(&ack) {
			err = &engineError{op: "remote_send", addr: pre.addr, proc: pre.procKey(), retry: true, preempted: true,
				err: errors.New("the prefill engine preempted the send (finish_reason preempt)")}
		}
		if err == nil {
			d.r.metrics.steps.WithLabelValues("remote_send").Observe(time.Since(t0).Seconds())
			if n, ok := intExtra(extraOf(ack.Usage), protocol.ExtraKVBytes); ok {
				d.r.metrics.kvBytes.Add(float64(n))
			}
			return ack.Usage, nil
		}
		var ee *engineError
		if !errors.As(err, &ee) || !ee.preempted || try == remoteSendTries {
			return nil, err
		}
		d.r.metrics.retry(causePreempt)
		if waitBackoff(ctx, try, true) != nil {
			return nil, context.Cause(ctx)
		}
	}
}

// preempted reports an answer whose choice the engine preempted.
func preempted(a *protocol.CompletionResponse) bool {
	for _, ch := range a.Choices {
		if ch.Finished() == protocol.FinishPreempt {
			return true
		}
	}
	return false
}

// extraOf is the extra of a usage, nil without one.
func extraOf(u *protocol.Usage) map[string]json.RawMessage {
	if u == nil {
		return nil
	}
	return u.Extra
}

// decodeCheckTimeout bounds the check of a decode engine after a failed
// remote_send.
const decodeCheckTimeout = 500 * time.Millisecond

// decodeAtFault tells, after a remote_send that failed without an answer
// (err), whether the decode engine is the one that does not answer: the
// prefill engine's KV transfer to a frozen decode engine hangs just as a
// frozen prefill engine does. It asks the decode engine directly; if it
// does not answer, the failure is its own (returned, so the attempt is
// retried on another decode engine), and the prefill engine, which was
// only waiting on it, is not blamed.
func (d *disagg) decodeAtFault(pre, dec *lease, err error) error {
	var ee *engineError
	if !errors.As(err, &ee) || !ee.timeout {
		return nil // the prefill engine answered (an error): it is alive, and so is the path
	}
	if engine.Probe(context.Background(), d.r.client.http, dec.url, decodeCheckTimeout) == nil {
		return nil
	}
	pre.forgive()
	dec.failed()
	return &engineError{op: "remote_send", addr: dec.addr, proc: dec.procKey(), retry: true, timeout: true,
		err: fmt.Errorf("the KV transfer to %s got no answer, nor did the engine: %w", dec.addr, err)}
}

// localRequest is req as the decode engine serves it whole when it
// prefills the request itself: MLC's plain /v1/completions, which every
// engine serves, under a user of its own: the attempt's may still name a
// reservation on this engine (a remote_send that failed), and MLC takes
// the user as the request's id, which must be unique.
func localRequest(req *protocol.CompletionRequest) *protocol.CompletionRequest {
	local := *req
	local.User = new(userOf(req) + "-local")
	return &local
}
