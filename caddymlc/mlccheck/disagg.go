package mlccheck

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// pairPrompts are the lengths of the prompts each pair of prefill and
// decode engines serves: within one KV page, a few pages, many pages.
var pairPrompts = []int{12, 40, 100}

// prefixMore is how many tokens the prompt of the prefix check adds to one
// the decode engine already served.
const prefixMore = 60

// remoteSendTries bounds the remote_sends a prefill engine may preempt,
// as the router's.
const remoteSendTries = 3

// prepRecord is one prep_recv answer, for the KV metadata check.
type prepRecord struct {
	decode    int
	metadata  string
	matched   int
	end       int
	promptLen int
}

// flowResult is one request served as the router disaggregates it.
type flowResult struct {
	text    string
	matched int
	end     int
	sent    bool // remote_send was made: the decode engine did not hold the window
}

// windowEnd is the end of the KV window the prefill engine computes, as
// the router sets it (see caddymlc's Router.PDBalanceFactor).
func (ck *checker) windowEnd(n int) int {
	f := ck.r.cfg.PDBalanceFactor
	if math.Abs(f) < 1e-5 {
		return -1
	}
	return int((1 - f) * float64(n))
}

// user is the user field of one attempt of the check: unique to the run.
func (ck *checker) user(name string) string { return "mlc-check-" + ck.p.nonce + "-" + name }

// microserving is the request of a microserving call: the router's, with
// its empty debug_config (MLC's entrypoints write disagg_config into it).
func microserving(ids []int, user string) *protocol.CompletionRequest {
	req := greedy(protocol.TokenPrompt(ids))
	req.User = &user
	req.DebugConfig = &protocol.DebugConfig{}
	return req
}

// prepRecv makes a prep_recv on decode engine d and records its answer.
func (ck *checker) prepRecv(ctx context.Context, d int, req *protocol.CompletionRequest) (protocol.PrepRecvResponse, int, error) {
	n := len(req.Prompt.IDs)
	prep := protocol.PrepRecvRequest{CompletionRequest: *req, End: ck.windowEnd(n)}
	end := protocol.ResolveIndex(prep.End, n)
	var recv protocol.PrepRecvResponse
	if err := ck.c.postJSON(ctx, ck.r.url(d)+protocol.PathPrepRecv, prep, &recv); err != nil {
		return recv, end, fmt.Errorf("prep_recv: %w", err)
	}
	ck.preps = append(ck.preps, prepRecord{decode: d, metadata: recv.KVAppendMetadata, matched: recv.PrefixMatchedLength,
		end: end, promptLen: n})
	if recv.PrefixMatchedLength < 0 || recv.PrefixMatchedLength > end {
		return recv, end, fmt.Errorf("prep_recv: prefix_matched_length %d outside the window [0, %d]", recv.PrefixMatchedLength, end)
	}
	return recv, end, nil
}

// flow serves ids through prefill engine p and decode engine d exactly as
// the router does: prep_recv on d, remote_send on p when d does not hold
// the window already (as the completion MLC's entrypoint makes of it),
// start_generate on d, whole. A reservation the flow gives up on is given
// back.
func (ck *checker) flow(ctx context.Context, p, d int, ids []int, user string) (flowResult, error) {
	req := microserving(ids, user)
	var res flowResult
	recv, end, err := ck.prepRecv(ctx, d, req)
	res.matched, res.end = recv.PrefixMatchedLength, end
	if err != nil {
		return res, err
	}
	if end <= 0 {
		ck.giveUp(ctx, d, req, end)
		return res, fmt.Errorf("a prompt of %d tokens leaves the prefill engine no window (pd_balance_factor %v)", len(ids), ck.r.cfg.PDBalanceFactor)
	}
	if recv.PrefixMatchedLength < end {
		res.sent = true
		if err := ck.remoteSend(ctx, p, req, recv, end, ck.r.starts[d]); err != nil {
			ck.giveUp(ctx, d, req, end)
			return res, err
		}
	}
	gen := protocol.StartGenerateRequest{CompletionRequest: *req, Begin: end}
	a, err := ck.c.complete(ctx, ck.r.url(d)+protocol.PathStartGenerate, gen)
	if err != nil {
		return res, fmt.Errorf("start_generate: %w", err)
	}
	res.text = a.text
	return res, nil
}

// remoteSend has prefill engine p compute [matched, end) into the decode
// engine of PE rank, retrying a send the engine preempted, as the router.
func (ck *checker) remoteSend(ctx context.Context, p int, req *protocol.CompletionRequest, recv protocol.PrepRecvResponse, end, rank int) error {
	send := protocol.RemoteSendRequest{CompletionRequest: *req, Begin: recv.PrefixMatchedLength, End: end,
		KVAddrInfo: recv.KVAppendMetadata, RecvRank: rank}.Completion()
	url := ck.r.url(p) + protocol.PathCompletions
	for try := 1; ; try++ {
		var ack protocol.CompletionResponse
		err := ck.c.postJSON(ctx, url, send, &ack)
		preempted := err == nil && slices.ContainsFunc(ack.Choices, func(ch protocol.CompletionChoice) bool {
			return ch.Finished() == protocol.FinishPreempt
		})
		if e := apiErrorOf(err); e != nil && e.Code != nil && *e.Code == protocol.FinishPreempt {
			preempted = true
		}
		switch {
		case err != nil && !preempted:
			return fmt.Errorf("remote_send: %w", err)
		case !preempted:
			return nil
		case try == remoteSendTries:
			return fmt.Errorf("remote_send: the prefill engine preempted it %d times (short of KV memory)", try)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
	}
}

// giveBack gives back the reservation prep_recv made for req on decode
// engine d, as the router does: caddy-mlc's release extension, or, on an
// engine without it, a whole start_generate that uses the reservation up.
// It reports how, or an error.
func (ck *checker) giveBack(ctx context.Context, d int, req *protocol.CompletionRequest, end int) (string, error) {
	if !ck.r.mlc() {
		var ack protocol.ReleaseResponse
		err := ck.c.postJSON(ctx, ck.r.url(d)+protocol.PathRelease, protocol.ReleaseRequest{User: *req.User}, &ack)
		if err == nil {
			return "release", nil
		}
		if !isNotFound(err) {
			return "", fmt.Errorf("release: %w", err)
		}
	}
	if err := ck.useUp(ctx, d, req, end); err != nil {
		return "", err
	}
	return "start_generate", nil
}

// giveUp gives back a reservation the check gave up on; a failure is
// logged: the engine's own timeout frees it then.
func (ck *checker) giveUp(ctx context.Context, d int, req *protocol.CompletionRequest, end int) {
	if _, err := ck.giveBack(ctx, d, req, end); err != nil {
		ck.log.Warn("could not give a reservation back", zap.String("engine", ck.r.addr(d)), zap.String("user", *req.User), zap.Error(err))
	}
}

// useUp uses up a reservation with a whole start_generate of one token,
// as the router does on an engine without the release extension (MLC's
// keeps the prep_recv's max_tokens: it generates those).
func (ck *checker) useUp(ctx context.Context, d int, req *protocol.CompletionRequest, end int) error {
	gen := protocol.StartGenerateRequest{CompletionRequest: *req.Clone(), Begin: max(end, 0)}
	gen.MaxTokens = new(1)
	if _, err := ck.c.complete(ctx, ck.r.url(d)+protocol.PathStartGenerate, gen); err != nil {
		return fmt.Errorf("start_generate to use the reservation up: %w", err)
	}
	return nil
}

// alone is the text engine i gives ids as a whole request.
func (ck *checker) alone(ctx context.Context, i int, ids []int) (string, error) {
	a, err := ck.c.complete(ctx, ck.r.url(i)+protocol.PathCompletions, greedy(protocol.TokenPrompt(ids)))
	return a.text, err
}

// pairs checks every pair of a prefill and a decode engine (two engines):
// for several prompts, disaggregated serving gives exactly the text the
// prefill engine gives alone; then, with the prefix cache on, a prompt
// that extends one the decode engine served matches that prefix and gives
// the right text too.
func (ck *checker) pairs(ctx context.Context) {
	n := 0
	for _, p := range ck.r.prefill {
		for _, d := range ck.r.decode {
			if p == d {
				continue
			}
			n++
			pair := []int{p, d}
			if !ck.answered[p] || !ck.answered[d] {
				ck.skip(CheckDisagg, pair, "an engine of the pair did not answer (see models)")
				ck.skip(CheckDisaggPrefix, pair, "an engine of the pair did not answer (see models)")
				continue
			}
			last, ok := ck.pair(ctx, p, d)
			if ok {
				ck.prefix(ctx, p, d, last)
			} else {
				ck.skip(CheckDisaggPrefix, pair, "the disagg check of the pair failed")
			}
		}
	}
	if n == 0 {
		ck.skip(CheckDisagg, nil, "no pair of two engines, one to prefill and one to decode: each request is served by one engine")
		ck.skip(CheckDisaggPrefix, nil, "no pair of two engines, one to prefill and one to decode")
	}
}

// pair runs the prompts of pairPrompts through prefill engine p and decode
// engine d; it returns the last prompt, and whether every one gave the
// text.
func (ck *checker) pair(ctx context.Context, p, d int) ([]int, bool) {
	pair := []int{p, d}
	var last []int
	matched := 0
	for k, n := range pairPrompts {
		ids := ck.p.ids(fmt.Sprintf("pair-%d-%d-%d", p, d, k), n)
		res, err := ck.flow(ctx, p, d, ids, ck.user(fmt.Sprintf("pair-%d-%d-%d", p, d, k)))
		if err != nil {
			ck.fail(CheckDisagg, pair, "a prompt of %d tokens: %v", n, err)
			return nil, false
		}
		want, err := ck.alone(ctx, p, ids)
		if err != nil {
			ck.fail(CheckDisagg, pair, "a prompt of %d tokens on the prefill engine alone: %v", n, err)
			return nil, false
		}
		if res.text != want {
			ck.fail(CheckDisagg, pair, "a prompt of %d tokens (KV window [%d, %d) sent): disaggregated %q, the prefill engine alone %q",
				n, res.matched, res.end, res.text, want)
			return nil, false
		}
		matched += res.matched
		last = ids
	}
	note := ""
	if matched > 0 {
		note = fmt.Sprintf("; the decode engine already held %d of their tokens", matched)
	}
	ck.pass(CheckDisagg, pair, "prompts of %v tokens: prep_recv, remote_send, start_generate give the text the prefill engine gives alone%s", pairPrompts, note)
	return last, true
}

// prefix checks a prompt that extends last, which decode engine d has
// just served: with the prefix cache on, prep_recv must match a prefix
// of it, and the request still give the right text.
func (ck *checker) prefix(ctx context.Context, p, d int, last []int) {
	pair := []int{p, d}
	if !ck.r.radix() {
		ck.skip(CheckDisaggPrefix, pair, "prefix_cache %s: the engines hold no prefix", ck.r.cfg.PrefixCache)
		return
	}
	ids := ck.p.more(last, fmt.Sprintf("prefix-%d-%d", p, d), prefixMore)
	res, err := ck.flow(ctx, p, d, ids, ck.user(fmt.Sprintf("prefix-%d-%d", p, d)))
	if err != nil {
		ck.fail(CheckDisaggPrefix, pair, "a prompt extending one the decode engine served: %v", err)
		return
	}
	want, err := ck.alone(ctx, p, ids)
	switch {
	case err != nil:
		ck.fail(CheckDisaggPrefix, pair, "the prompt on the prefill engine alone: %v", err)
	case res.matched == 0:
		ck.fail(CheckDisaggPrefix, pair, "prefix_cache radix, yet prep_recv matched nothing of a prompt whose first %d tokens the decode engine has just served", len(last))
	case res.text != want:
		ck.fail(CheckDisaggPrefix, pair, "%d tokens matched, window [%d, %d) sent: disaggregated %q, the prefill engine alone %q", res.matched, res.matched, res.end, res.text, want)
	default:
		sent := "nothing left to send"
		if res.sent {
			sent = fmt.Sprintf("[%d, %d) sent", res.matched, res.end)
		}
		ck.pass(CheckDisaggPrefix, pair, "%d of %d tokens matched in the decode engine's prefix cache, %s: the text the prefill engine gives alone", res.matched, len(ids), sent)
	}
}

// kvMetadata checks the kv_append_metadata of every prep_recv the disagg
// checks made, per decode engine: it decodes, each model's segments hold
// exactly the window the prefill engine sends, and the recv_rank the router
// sends with it is the engine's own PE (where the engine reports it).
func (ck *checker) kvMetadata() {
	for _, d := range ck.r.decode {
		if !ck.answered[d] {
			ck.skip(CheckKVMetadata, []int{d}, "the engine did not answer (see models)")
			continue
		}
		var problems []error
		seen, models := 0, 0
		for _, rec := range ck.preps {
			if rec.decode != d {
				continue
			}
			seen++
			m, err := checkMetadata(rec)
			if err != nil {
				problems = append(problems, err)
			}
			models = max(models, m)
		}
		npes := ck.r.starts[len(ck.r.starts)-1]
		rank := ck.r.starts[d]
		switch {
		case seen == 0:
			ck.skip(CheckKVMetadata, []int{d}, "no prep_recv was answered (see disagg)")
			continue
		case rank < 0 || rank >= npes:
			problems = append(problems, fmt.Errorf("recv_rank %d is outside the world of %d PEs", rank, npes))
		case ck.pe[d] >= 0 && ck.pe[d] != rank:
			problems = append(problems, fmt.Errorf("recv_rank %d (the config's PE of this engine) is not the engine's own first PE %d: the prefill engine would write the KV into whichever engine holds PE %d", rank, ck.pe[d], rank))
		}
		if len(problems) > 0 {
			ck.fail(CheckKVMetadata, []int{d}, "%v", errors.Join(problems...))
			continue
		}
		pe := fmt.Sprintf("the engine's own first PE %d", rank)
		if ck.pe[d] < 0 {
			pe = fmt.Sprintf("PE %d of %d as the config places it (the engine does not report its own)", rank, npes)
		}
		ck.pass(CheckKVMetadata, []int{d}, "%d prep_recvs: metadata of %d model(s), each covering the window to send; recv_rank %s", seen, models, pe)
	}
}

// checkMetadata checks one prep_recv's metadata and returns its number of
// models.
func checkMetadata(rec prepRecord) (int, error) {
	models, err := countModels(rec.metadata)
	if err != nil {
		return 0, err
	}
	m, err := protocol.DecodeKVAppendMetadata(rec.metadata, models)
	if err != nil {
		return 0, err
	}
	want := rec.end - rec.matched
	for i := range m {
		if got := m.Tokens(i); got != want {
			return models, fmt.Errorf("kv_append_metadata: model %d has slots for %d tokens; the window [%d, %d) of a prompt of %d tokens is %d",
				i, got, rec.matched, rec.end, rec.promptLen, want)
		}
	}
	return models, nil
}

// countModels counts the models of a kv_append_metadata: one
// [num_segments, start, length, ...] run per model, back to back.
func countModels(s string) (int, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return 0, fmt.Errorf("kv_append_metadata: not base64: %w", err)
	}
	var flat []int
	if err := json.Unmarshal(raw, &flat); err != nil {
		return 0, fmt.Errorf("kv_append_metadata: not a JSON array of integers: %w", err)
	}
	models := 0
	for i := 0; i < len(flat); models++ {
		if flat[i] < 0 || flat[i] > (len(flat)-i-1)/2 {
			return 0, fmt.Errorf("kv_append_metadata: model %d: bad segment count %d", models, flat[i])
		}
		i += 1 + 2*flat[i]
	}
	if models == 0 {
		return 0, errors.New("kv_append_metadata: no model")
	}
	return models, nil
}
