package caddymlc

import (
	"context"
	"fmt"
	"math"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// disagg is MLC's disaggregated flow: prep_recv on the decode engine,
// remote_send on the prefill engine (when the decode engine's prefix cache
// does not already hold the window), start_generate on the decode engine.
type disagg struct {
	bal     *balancer
	client  *engineClient
	prefill []int // endpoints that may prefill
	decode  []int // endpoints that may decode
	balance float64
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

func (d *disagg) open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, func(), error) {
	dec, releaseDec := d.bal.acquire(d.decode, avoid)
	if dec == nil {
		return nil, nil, &noEngineError{"decode"}
	}
	ok := false
	defer func() {
		if !ok {
			releaseDec()
		}
	}()
	n := len(req.Prompt.IDs)
	prep := protocol.PrepRecvRequest{CompletionRequest: *req, End: d.windowEnd(n)}
	prep.Stream = false
	prep.StreamOptions = nil
	var recv protocol.PrepRecvResponse
	if err := d.client.call(ctx, dec, protocol.PathPrepRecv, prep, &recv); err != nil {
		return nil, nil, err
	}
	end := protocol.ResolveIndex(prep.End, n)
	if recv.PrefixMatchedLength > end || recv.PrefixMatchedLength < 0 {
		return nil, nil, &engineError{op: "prep_recv", addr: dec.addr, retry: true,
			err: fmt.Errorf("prefix_matched_length %d outside the window [0, %d]", recv.PrefixMatchedLength, end)}
	}
	if recv.PrefixMatchedLength < end {
		if err := d.remoteSend(ctx, req, dec, recv, end, avoid); err != nil {
			return nil, nil, err
		}
	}
	gen := protocol.StartGenerateRequest{CompletionRequest: *req, Begin: end}
	s, err := d.client.stream(ctx, dec, protocol.PathStartGenerate, gen)
	if err != nil {
		return nil, nil, err
	}
	ok = true
	return s, releaseDec, nil
}

// remoteSend has a prefill engine compute the window [matched, end) and
// write its KV into the decode engine.
func (d *disagg) remoteSend(ctx context.Context, req *protocol.CompletionRequest, dec *backend, recv protocol.PrepRecvResponse, end int, avoid map[string]bool) error {
	pre, release := d.bal.acquire(d.prefill, avoid)
	if pre == nil {
		return &noEngineError{"prefill"}
	}
	defer release()
	send := protocol.RemoteSendRequest{
		CompletionRequest: *req,
		Begin:             recv.PrefixMatchedLength,
		End:               end,
		KVAddrInfo:        recv.KVAppendMetadata,
		RecvRank:          dec.peStart,
	}
	send.Stream = false
	send.StreamOptions = nil
	var ack map[string]any
	return d.client.call(ctx, pre, protocol.PathRemoteSend, send, &ack)
}
