package router

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// Load polling: the router's own in-flight counts do not see the work of
// other Caddy replicas, nor reservations an engine still holds, so each
// fleet asks its engines for their load (MLC's query_engine_metrics
// special request) on a short interval. The built-in engine reports
// running and waiting sequences, reservations and free KV pages, and, as
// caddy-mlc's extension, its first NVSHMEM PE (pe_start: how a discovered
// engine's recv_rank is learnt); an engine that reports none of them
// (MLC's own reports timings only) is balanced on the router's counts
// alone. The built-in engine also reports its load at the end of every
// request, so an engine whose requests end often is hardly polled.
const (
	loadPollInterval = 100 * time.Millisecond
	loadPollTimeout  = time.Second
	// noLoadPollInterval is how often an engine whose answer had no load
	// (MLC's) is asked again: it may be replaced by one that reports.
	noLoadPollInterval = 5 * time.Second
)

// loadQuery is the body of a query_engine_metrics request.
var loadQuery = []byte(`{"prompt":[0],"max_tokens":1,"debug_config":{"special_request":"` + protocol.SpecialQueryEngineMetrics + `"}}`)

// pollLoad polls every engine of the fleet until ctx is done.
func (lf *LiveFleet) pollLoad(ctx context.Context) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true}}
	for _, u := range lf.upstreams {
		goroutine.Go(lf.Log(), "engine load poll", func() {
			t := time.NewTicker(loadPollInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					client.CloseIdleConnections()
					return
				case <-t.C:
				}
				if ready, _ := u.status(); ready && u.pollDue(time.Now()) {
					u.pollOnce(ctx, client)
				}
			}
		}, nil)
	}
}

// pollOnce asks the engine for its load and records it. An engine that
// does not answer keeps its last report, which goes stale.
func (u *Upstream) pollOnce(ctx context.Context, client *http.Client) {
	// A bug here must cost one report, not the poller.
	defer goroutine.Recover(u.fleet.Log(), "engine load poll", nil)
	ctx, cancel := context.WithTimeout(ctx, loadPollTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url+protocol.PathCompletions, bytes.NewReader(loadQuery))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	own := u.inflight.Load()
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxEngineErrorBody))
		return
	}
	var out protocol.CompletionResponse
	if err := readJSON(resp.Body, &out); err != nil {
		return
	}
	var extra map[string]json.RawMessage
	if out.Usage != nil {
		extra = out.Usage.Extra
	}
	if pe, ok := intExtra(extra, "pe_start"); ok {
		u.pe.Store(int64(pe))
	}
	// Our count moved while the engine answered: the larger one is ours
	// for sure, so what is left is not ours (never our own requests seen
	// as another replica's).
	if !u.report(extra, max(own, u.inflight.Load())) {
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
	if l := u.load.Load(); l != nil && now.Sub(l.at) < loadPollInterval {
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
	if l.pagesTotal > 0 {
		g := u.kvGauges()
		g[0].Set(float64(max(l.pagesTotal-l.pagesFree-l.pagesCached, 0)))
		g[1].Set(float64(l.pagesCached))
		g[2].Set(float64(l.pagesFree))
	}
	if ce := u.fleet.Log().Check(zap.DebugLevel, "engine load"); ce != nil {
		ce.Write(addrField(u), zap.Int("running", l.running), zap.Int("waiting", l.waiting), zap.Int("blocked", l.blocked),
			zap.Int("prepared", l.prepared), zap.Int("kv_pages_free", l.pagesFree))
	}
	return true
}

// parseLoad reads the load fields of a query_engine_metrics answer; ok is
// false when the engine reports none of them. An engine that reports what
// waits but not what of it is blocked has all of it taken as blocked.
func parseLoad(extra map[string]json.RawMessage) (engineLoad, bool) {
	l := engineLoad{blocked: -1}
	found := false
	// An array, not a map: this runs at every request's end.
	for _, f := range [...]struct {
		key string
		dst *int
	}{
		{"running", &l.running}, {"waiting", &l.waiting}, {"blocked", &l.blocked}, {"prepared", &l.prepared},
		{"kv_pages_free", &l.pagesFree}, {"kv_pages_cached", &l.pagesCached}, {"kv_pages_total", &l.pagesTotal},
	} {
		if n, ok := intExtra(extra, f.key); ok {
			*f.dst, found = n, true
		}
	}
	if l.blocked < 0 {
		l.blocked = l.waiting
	}
	return l, found
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
