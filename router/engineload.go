package router

import (
	"encoding/json"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// What engines say of their load: the answers to the fleet's polls
// (engine.Fleet.PollLoad) and, from the built-in engine, every request's
// last usage.extra. An engine that reports none of the load fields
// (MLC's) is balanced on the router's counts alone.

// noLoadPollInterval is how often an engine whose answer had no load
// (MLC's) is asked again: it may be replaced by one that reports.
const noLoadPollInterval = 5 * time.Second

// answered records the engine's answer to a load poll. Our count moved
// while the engine answered: the larger one is ours for sure, so what is
// left is not ours (never our own requests seen as another replica's).
func (u *Upstream) answered(extra map[string]json.RawMessage) {
	// A bug here must cost one report, not the poller.
	defer goroutine.Recover(u.pool.Log(), "engine load poll", nil)
	if pe, ok := intExtra(extra, protocol.ExtraPEStart); ok {
		u.pe.Store(int64(pe))
	}
	if !u.report(extra, max(u.ownAtAsk.Load(), u.inflight.Load())) {
		u.unreported.Store(time.Now().UnixNano())
	}
}

// pollDue reports whether the engine is to be polled now: always while
// its PE is unknown (a poll's answer brings it); else not when a request's
// end brought a report within the poll interval (see report), and only
// every noLoadPollInterval when its last poll answered no load.
func (u *Upstream) pollDue(now time.Time) bool {
	if u.pe.Load() < 0 {
		return true
	}
	if l := u.load.Load(); l != nil && now.Sub(l.at) < engine.LoadPollInterval {
		return false
	}
	if t := u.unreported.Load(); t != 0 && now.Sub(time.Unix(0, t)) < noLoadPollInterval {
		return false
	}
	return true
}

// report records the load in extra, a usage.extra (a poll's answer, or a
// request's last event), if it has any: own is our in-flight count as the
// engine counted its work.
func (u *Upstream) report(extra map[string]json.RawMessage, own int64) bool {
	l, ok := parseLoad(extra)
	if !ok {
		return false
	}
	l.at, l.ownAtPoll = time.Now(), max(own, 0)
	u.load.Store(&l)
	u.unreported.Store(0)
	if l.PagesTotal > 0 {
		g := u.kvGauges()
		g[0].Set(float64(max(l.PagesTotal-l.PagesFree-l.PagesCached, 0)))
		g[1].Set(float64(l.PagesCached))
		g[2].Set(float64(l.PagesFree))
	}
	if ce := u.pool.Log().Check(zap.DebugLevel, "engine load"); ce != nil {
		ce.Write(addrField(u), zap.Int(protocol.ExtraRunning, l.Running), zap.Int(protocol.ExtraWaiting, l.Waiting),
			zap.Int(protocol.ExtraBlocked, l.Blocked), zap.Int(protocol.ExtraPrepared, l.Prepared), zap.Int(protocol.ExtraPagesFree, l.PagesFree))
	}
	return true
}

// parseLoad reads the load fields of a query_engine_metrics answer; ok is
// false when the engine reports none of them.
func parseLoad(extra map[string]json.RawMessage) (engineLoad, bool) {
	l, ok := protocol.ParseEngineLoad(extra)
	return engineLoad{EngineLoad: l}, ok
}

// intExtra reads an integer field of usage.extra.
func intExtra(extra map[string]json.RawMessage, key string) (int, bool) {
	raw, ok := extra[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil
}

// kvGauges are the engine's caddy_mlc_engine_kv_pages series: used,
// cached, free; made once, as reports come at every request's end.
func (u *Upstream) kvGauges() *[3]prometheus.Gauge {
	u.kvOnce.Do(func() {
		kv := sharedMetrics().kvPages
		u.kv = [3]prometheus.Gauge{kv.WithLabelValues(u.addr, "used"), kv.WithLabelValues(u.addr, "cached"), kv.WithLabelValues(u.addr, "free")}
	})
	return &u.kv
}

func addrField(u *Upstream) zap.Field { return zap.String("engine", u.addr) }
