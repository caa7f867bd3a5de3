package router

import (
	"context"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// When decode capacity is short: a disaggregated attempt (new or resumed)
// for which no decode engine has room (none is ready, or the best of them
// is saturated, avoided or broken) is served whole by a prefill engine
// that has room for all of it. A prefill engine generates as well as any;
// a stream sent to a full decode engine instead waits behind held pages,
// or preempts another, which then does the same, while KV is spare on the
// prefill engine. Only when no engine has room does the attempt wait:
// that is counted (caddy_mlc_capacity_waits_total), and bounded by
// queue_timeout while no decode engine is ready (acquire) and by
// engine_timeout on a full one (the call's watchdog, then a retry).

// shortDecode is the reason of caddy_mlc_local_prefills_total for an
// attempt a prefill engine serves whole.
const shortDecode = "decode_short"

// decodeEngine holds the engine that generates the attempt: the decode
// engine pick chooses, or, when it has no room, a prefill engine with
// room, for which short is shortDecode (the attempt is then served whole
// there). The hot path, a decode engine with room, is one pick as before.
func (d *disagg) decodeEngine(ctx context.Context, o pickOptions, whole *protocol.CompletionRequest) (l *lease, short string, err error) {
	if d.r.handedOver() {
		return nil, "", errDraining
	}
	dec := d.r.pick(engine.RoleDecode, o)
	if dec != nil && dec.tier == TierGood {
		return dec, "", nil
	}
	if pre := d.roomyPrefill(o, dec, whole); pre != nil {
		if dec != nil {
			dec.release(nil)
		}
		return pre, shortDecode, nil
	}
	if dec == nil || dec.saturated(time.Now(), o.needPages) {
		d.r.metrics.capacityWaits.Inc()
	}
	if dec != nil {
		return dec, "", nil
	}
	dec, err = d.r.acquire(ctx, engine.RoleDecode, o)
	return dec, "", err
}

// roomyPrefill holds a prefill engine (not dec) that is ready, not
// avoided nor broken, and reports room for the whole of the attempt's KV,
// its prompt and every token it may generate; nil if there is none.
func (d *disagg) roomyPrefill(o pickOptions, dec *lease, whole *protocol.CompletionRequest) *lease {
	n := len(o.req.Prompt)
	if whole.MaxTokens != nil {
		n += *whole.MaxTokens
	}
	po := pickOptions{avoid: o.avoid, req: o.req, needPages: pagesFor(n), noBroken: true}
	if dec != nil {
		po.exclude = dec.Upstream
	}
	pre := d.r.pick(engine.RolePrefill, po)
	if pre != nil && pre.tier != TierGood {
		pre.release(nil)
		return nil
	}
	return pre
}
