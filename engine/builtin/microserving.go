package builtin

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The three microserving endpoints. Each decodes its request, sets
// debug_config.disagg_config as MLC's entrypoints do, and runs it as a
// completion; they correlate by the request's user field.

// prepRecvEndpoint answers POST /microserving/prep_recv.
func (s *server) prepRecvEndpoint(w http.ResponseWriter, r *http.Request) {
	var req protocol.PrepRecvRequest
	if !s.decodeMicro(w, r, &req, &req.CompletionRequest) {
		return
	}
	req.Stream, req.StreamOptions = false, nil
	end := req.End
	setDisagg(&req.CompletionRequest, protocol.DisaggConfig{Kind: protocol.DisaggPrepareReceive, KVWindowEnd: &end})
	res, _, perr := s.prepRecv(r.Context(), &req.CompletionRequest)
	if perr != nil {
		perr.Write(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, res)
}

// remoteSendEndpoint answers POST /microserving/remote_send.
func (s *server) remoteSendEndpoint(w http.ResponseWriter, r *http.Request) {
	var req protocol.RemoteSendRequest
	if !s.decodeMicro(w, r, &req, &req.CompletionRequest) {
		return
	}
	begin, end, rank := req.Begin, req.End, req.RecvRank
	setDisagg(&req.CompletionRequest, protocol.DisaggConfig{
		Kind: protocol.DisaggRemoteSend, KVAppendMetadata: req.KVAddrInfo,
		KVWindowBegin: &begin, KVWindowEnd: &end, DstGroupOffset: &rank,
	})
	sent, _, perr := s.remoteSend(r.Context(), &req.CompletionRequest)
	if perr != nil {
		perr.Write(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, protocol.RemoteSendResponse{KVBytes: sent})
}

// startGenerateEndpoint answers POST /microserving/start_generate.
func (s *server) startGenerateEndpoint(w http.ResponseWriter, r *http.Request) {
	var req protocol.StartGenerateRequest
	if !s.decodeMicro(w, r, &req, &req.CompletionRequest) {
		return
	}
	begin := req.Begin
	setDisagg(&req.CompletionRequest, protocol.DisaggConfig{Kind: protocol.DisaggStartGeneration, KVWindowBegin: &begin})
	s.startGeneration(w, r, &req.CompletionRequest)
}

// decodeMicro reads a microserving request into v, whose completion part
// is req, and validates it.
func (s *server) decodeMicro(w http.ResponseWriter, r *http.Request, v any, req *protocol.CompletionRequest) bool {
	perr := s.decodeDebugRequest(r, v)
	if perr == nil {
		perr = req.ValidateForEngine()
	}
	if perr != nil {
		perr.Write(w)
		return false
	}
	return true
}

// decodeDebugRequest reads the JSON body of a request to an endpoint that
// only an engine started with --enable-debug serves into v.
func (s *server) decodeDebugRequest(r *http.Request, v any) *protocol.Error {
	if perr := s.requireDebug(); perr != nil {
		return perr
	}
	b, perr := protocol.ReadBody(r.Body, 0)
	if perr != nil {
		return perr
	}
	return protocol.DecodeJSON(b, v)
}

func (s *server) requireDebug() *protocol.Error {
	if !s.e.opts.EnableDebug {
		return protocol.InvalidRequest("", "microserving needs an engine started with --enable-debug")
	}
	return nil
}

// setDisagg sets the request's disagg_config.
func setDisagg(req *protocol.CompletionRequest, dc protocol.DisaggConfig) {
	if req.DebugConfig == nil {
		req.DebugConfig = &protocol.DebugConfig{}
	}
	req.DebugConfig.DisaggConfig = &dc
}

// userOf returns the request's user, which ties the microserving calls of
// one request together.
func userOf(req *protocol.CompletionRequest) (string, *protocol.Error) {
	if req.User == nil || *req.User == "" {
		return "", protocol.InvalidRequest("user", "microserving requests need the user field: it ties prep_recv, remote_send and start_generate together")
	}
	return *req.User, nil
}

// window resolves a Python-style index into [0, n].
func window(name string, i *int, def, n int) (int, *protocol.Error) {
	v := def
	if i != nil {
		v = *i
	}
	r := protocol.ResolveIndex(v, n)
	if r < 0 || r > n {
		return 0, protocol.InvalidRequest(name, "%s %d is outside the prompt of %d tokens", name, v, n)
	}
	return r, nil
}

// prepRecv reserves the decode engine's KV for [0, end) of the prompt,
// waiting for pages when the cache is full.
func (s *server) prepRecv(ctx context.Context, req *protocol.CompletionRequest) (protocol.PrepRecvResponse, int, *protocol.Error) {
	var res protocol.PrepRecvResponse
	user, perr := userOf(req)
	if perr != nil {
		return res, 0, perr
	}
	tokens, perr := s.tokenize(req.Prompt)
	if perr != nil {
		return res, 0, perr
	}
	end, perr := window("end", req.DebugConfig.DisaggConfig.KVWindowEnd, -1, len(tokens))
	if perr != nil {
		return res, 0, perr
	}
	w := &prepWait{user: user, tokens: tokens, end: end, done: make(chan prepResult, 1)}
	if err := s.e.do(func() { s.e.queuePrepRecv(w) }); err != nil {
		return res, 0, unavailable(err)
	}
	var pr prepResult
	select {
	case pr = <-w.done:
		if pr.err == nil && ctx.Err() != nil {
			// Served as the caller left (both were ready): it will never
			// use the reservation.
			_ = s.e.do(func() { s.e.cancelPrepRecv(w) })
			return res, 0, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "client went away")
		}
	case <-ctx.Done():
		_ = s.e.do(func() { s.e.cancelPrepRecv(w) })
		return res, 0, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "client went away")
	case <-s.e.Done():
		return res, 0, unavailable(errStopped)
	}
	if pr.err != nil {
		return res, 0, pr.err
	}
	meta := pr.meta
	res.PrefixMatchedLength = pr.matched
	res.KVAppendMetadata = meta.Encode()
	s.e.logf("prep_recv %q: %d tokens, end %d, prefix matched %d", user, len(tokens), end, res.PrefixMatchedLength)
	return res, len(tokens), nil
}

// prepRecvCompletion answers a prepare_receive completion: no choices,
// and the reservation in usage.extra.
func (s *server) prepRecvCompletion(w http.ResponseWriter, r *http.Request, req *protocol.CompletionRequest) {
	res, n, perr := s.prepRecv(r.Context(), req)
	if perr != nil {
		perr.Write(w)
		return
	}
	resp := s.response(req, &request{id: protocol.NewID("")})
	resp.Usage = &protocol.Usage{PromptTokens: n, TotalTokens: n, Extra: map[string]json.RawMessage{}}
	resp.Usage.Extra["kv_append_metadata"] = jsonString(res.KVAppendMetadata)
	resp.Usage.Extra[protocol.ExtraPrefixMatchedLength] = jsonInt(res.PrefixMatchedLength)
	resp.Usage.Extra["prompt_length"] = jsonInt(n)
	protocol.WriteJSON(w, http.StatusOK, resp)
}

// remoteSendCompletion answers a remote_send completion with no choices,
// and, as caddy-mlc's extensions, the bytes of keys and values it sent in
// usage.extra.kv_bytes (as RemoteSendResponse.KVBytes) and what of the
// window its own prefix cache held in usage.extra.prefix_matched_length.
func (s *server) remoteSendCompletion(w http.ResponseWriter, r *http.Request, req *protocol.CompletionRequest) {
	sent, matched, perr := s.remoteSend(r.Context(), req)
	if perr != nil {
		perr.Write(w)
		return
	}
	resp := s.response(req, &request{id: protocol.NewID("")})
	resp.Usage = &protocol.Usage{Extra: map[string]json.RawMessage{protocol.ExtraKVBytes: jsonInt(int(sent)),
		protocol.ExtraPrefixMatchedLength: jsonInt(matched)}}
	protocol.WriteJSON(w, http.StatusOK, resp)
}

// startGeneration prefills [begin, len(prompt)) on the user's reservation
// and generates.
func (s *server) startGeneration(w http.ResponseWriter, r *http.Request, req *protocol.CompletionRequest) {
	user, perr := userOf(req)
	if perr != nil {
		perr.Write(w)
		return
	}
	tokens, perr := s.tokenize(req.Prompt)
	if perr != nil {
		perr.Write(w)
		return
	}
	begin, perr := window("begin", req.DebugConfig.DisaggConfig.KVWindowBegin, 0, len(tokens))
	if perr != nil {
		perr.Write(w)
		return
	}
	s.generate(w, r, req, user, begin, s.completionAnswer(req))
}

// remoteSend computes the KV of the window [begin, end) and writes it into
// the KV slots of the decode engine that holds PE recv_rank, returning once
// that engine has acknowledged the data. It returns the bytes of keys and
// values sent, and the tokens of [0, end) its prefix cache held (it
// computed the rest).
func (s *server) remoteSend(ctx context.Context, req *protocol.CompletionRequest) (int64, int, *protocol.Error) {
	t, peerAddr, tokens, perr := s.planSend(req)
	if perr != nil {
		return 0, 0, perr
	}
	if len(t.slots) == 0 {
		return 0, t.begin, nil // nothing to send: the decode engine holds the window
	}
	cr := &request{id: t.user, prompt: tokens, computeOnly: true, sendBegin: t.begin, events: newEventQueue(), arrival: arrivalOf(req.Arrival)}
	cr.seqs = []*sequence{{req: cr, tokens: tokens, out: s.e.newOutput(nil)}}
	if err := s.e.do(func() { s.e.submit(cr) }); err != nil {
		return 0, 0, unavailable(err)
	}
	payload, perr := s.awaitPayload(ctx, cr)
	if perr != nil {
		return 0, 0, perr
	}
	t.data = payload
	if tm := s.e.timed; tm != nil {
		// The copy over the link the profile names; the GPU computes on
		// beside it.
		sleepUntil(ctx, time.Now().Add(tm.transferTime(len(t.slots))))
	}
	if perr := sendKV(ctx, s.client, peerAddr, t); perr != nil {
		return 0, 0, perr
	}
	s.e.logf("remote_send %q: tokens [%d, %d) to %s, %d from the prefix cache", t.user, t.begin, t.begin+len(t.slots), peerAddr, cr.prefixMatched)
	return int64(len(payload)), cr.prefixMatched, nil
}

// planSend checks a remote_send request and returns the transfer to fill,
// the destination and the tokens [0, end) to compute.
func (s *server) planSend(req *protocol.CompletionRequest) (*transfer, string, []int, *protocol.Error) {
	user, perr := userOf(req)
	if perr != nil {
		return nil, "", nil, perr
	}
	tokens, perr := s.tokenize(req.Prompt)
	if perr != nil {
		return nil, "", nil, perr
	}
	dc := req.DebugConfig.DisaggConfig
	begin, perr := window("begin", dc.KVWindowBegin, 0, len(tokens))
	if perr != nil {
		return nil, "", nil, perr
	}
	end, perr := window("end", dc.KVWindowEnd, -1, len(tokens))
	if perr != nil {
		return nil, "", nil, perr
	}
	if begin > end {
		return nil, "", nil, protocol.InvalidRequest("begin", "begin %d is after end %d", begin, end)
	}
	meta, err := protocol.DecodeKVAppendMetadata(dc.KVAppendMetadata, 1)
	if err != nil {
		return nil, "", nil, protocol.InvalidRequest("kv_addr_info", "%v", err)
	}
	if n := meta.Tokens(0); n != end-begin {
		return nil, "", nil, protocol.InvalidRequest("kv_addr_info", "kv_addr_info holds %d tokens, the window [%d, %d) has %d", n, begin, end, end-begin)
	}
	rank := -1
	if dc.DstGroupOffset != nil {
		rank = *dc.DstGroupOffset
	}
	p, err := s.world.peerOf(rank)
	if err != nil {
		return nil, "", nil, protocol.InvalidRequest("recv_rank", "%v", err)
	}
	fp, layers, dim := s.e.kvShape()
	t := &transfer{fingerprint: fp, layers: layers, dim: dim, user: user, begin: begin}
	for _, seg := range meta[0] {
		for i := range seg.Length {
			t.slots = append(t.slots, seg.Start+i)
		}
	}
	return t, p.Addr, tokens[:end], nil
}

// awaitPayload waits for a computeOnly request's keys and values.
func (s *server) awaitPayload(ctx context.Context, cr *request) ([]byte, *protocol.Error) {
	for {
		evs, err := cr.events.wait(ctx)
		if err != nil {
			s.abort(cr)
			return nil, protocol.Errorf(protocol.StatusClientClosedRequest, protocol.ErrTypeServer, "client went away")
		}
		for _, ev := range evs {
			switch {
			case !ev.done:
				continue
			case ev.payload != nil:
				return ev.payload, nil
			case ev.aborted:
				return nil, unavailable(errStopped)
			default:
				return nil, protocol.Errorf(http.StatusServiceUnavailable, protocol.ErrTypeUnavailable,
					"remote_send was preempted: KV cache full").WithCode(protocol.FinishPreempt)
			}
		}
	}
}

// kvTransfer answers POST /microserving/kv_transfer: another engine of the
// world writes keys and values into this engine's reserved slots.
func (s *server) kvTransfer(w http.ResponseWriter, r *http.Request) {
	if s.world == nil {
		protocol.InvalidRequest("", "KV transfer needs an engine in disaggregation mode").Write(w)
		return
	}
	b, perr := protocol.ReadBody(r.Body, maxTransferBytes)
	if perr != nil {
		perr.Write(w)
		return
	}
	t, err := decodeTransfer(b)
	if err != nil {
		protocol.InvalidRequest("", "%v", err).Write(w)
		return
	}
	if perr := s.e.checkTransfer(t); perr != nil {
		perr.Write(w)
		return
	}
	if err := s.e.do(func() { perr = s.e.receiveKV(t) }); err != nil {
		perr = unavailable(err)
	}
	if perr != nil {
		perr.Write(w)
		return
	}
	protocol.WriteJSON(w, http.StatusOK, struct{}{})
}
