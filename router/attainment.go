package router

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Attainment: of the requests with latency targets, the share that met
// them, per model, tenant and priority band, in the metrics
// (caddy_mlc_slo_requests_total) and in the router's status. A request
// meets its targets when it is answered, its first token came within its
// TTFT target of its arrival, and its tokens after the first came at its
// TPOT target or faster on average; one the gate refused for its targets
// missed them.

// attainment counts a router's requests with targets, by tenant label
// (the metrics' top tenants, the rest as other) and band.
type attainment struct {
	counts sync.Map // attainKey → *attainCount
}

type attainKey struct {
	tenant string
	band   int
}

type attainCount struct{ n, met atomic.Int64 }

// maxBandLabel bounds the bands the metrics and the status name: bands
// beyond ±maxBandLabel are one series each side, so that a header cannot
// grow them unbounded.
const maxBandLabel = 9

// bandLabel is a band as the metrics name it.
func bandLabel(band int) string {
	switch {
	case band > maxBandLabel:
		return ">" + strconv.Itoa(maxBandLabel)
	case band < -maxBandLabel:
		return "<-" + strconv.Itoa(maxBandLabel)
	}
	return strconv.Itoa(band)
}

// met judges a finished request against its targets: ttft from its
// arrival, total its whole time, tokens what it generated.
func met(t Targets, ok bool, ttft, total time.Duration, tokens int) bool {
	if !ok {
		return false
	}
	if ttft <= 0 {
		ttft = total // a whole answer: its first token came with the rest
	}
	if t.TTFT > 0 && ttft > t.TTFT {
		return false
	}
	if t.TPOT > 0 && tokens > 1 && (total-ttft)/time.Duration(tokens-1) > t.TPOT {
		return false
	}
	return true
}

// record counts a request of model with facts f that met its targets or
// not; nothing for one without targets.
func (a *attainment) record(m *routerMetrics, model string, f Facts, ok bool) {
	if !f.Targets.Set() {
		return
	}
	tenant := m.tenants.Label(f.Tenant, 1)
	m.slo.WithLabelValues(model, tenant, bandLabel(f.Band), strconv.FormatBool(ok)).Inc()
	key := attainKey{tenant, max(min(f.Band, maxBandLabel+1), -maxBandLabel-1)}
	v, found := a.counts.Load(key)
	if !found {
		v, _ = a.counts.LoadOrStore(key, new(attainCount))
	}
	c := v.(*attainCount)
	c.n.Add(1)
	if ok {
		c.met.Add(1)
	}
}

// sloFields are the Debug log line's fields of a request's targets.
func sloFields(t Targets, ok bool) []zap.Field {
	if !t.Set() {
		return nil
	}
	return []zap.Field{zap.Duration("slo_ttft", t.TTFT), zap.Duration("slo_tpot", t.TPOT), zap.Bool("slo_met", ok)}
}

// SLOStatus is the attainment of a router's requests with latency
// targets, since it started: all of them, then by tenant and band.
type SLOStatus struct {
	AttainStatus
	ByTenant []AttainStatus `json:"by_tenant,omitempty"`
}

// AttainStatus is how many requests had targets and how many met them.
type AttainStatus struct {
	Tenant     string  `json:"tenant,omitempty"`
	Band       int     `json:"band"`
	Requests   int64   `json:"requests"`
	Met        int64   `json:"met"`
	Attainment float64 `json:"attainment"` // met / requests
}

// status is the attainment so far; nil before any request had targets.
func (a *attainment) status() *SLOStatus {
	var st SLOStatus
	a.counts.Range(func(k, v any) bool {
		key, c := k.(attainKey), v.(*attainCount)
		s := AttainStatus{Tenant: key.tenant, Band: key.band, Requests: c.n.Load(), Met: c.met.Load()}
		s.Attainment = float64(s.Met) / float64(max(s.Requests, 1))
		st.Requests += s.Requests
		st.Met += s.Met
		st.ByTenant = append(st.ByTenant, s)
		return true
	})
	if st.Requests == 0 {
		return nil
	}
	st.Attainment = float64(st.Met) / float64(st.Requests)
	slices.SortFunc(st.ByTenant, func(a, b AttainStatus) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), b.Band-a.Band)
	})
	return &st
}

// newSLORequests is the attainment's series.
func newSLORequests() *prometheus.CounterVec {
	return newCounterVec("slo_requests_total",
		"Requests with latency targets, by model, tenant (the top tenants by traffic; the rest as other), priority band and whether they met them (met: true, false; one the gate refused for its targets counts as false).",
		"model", "tenant", "band", "met")
}

// newSLORefused is the series of the requests refused for their targets.
func newSLORefused() *prometheus.CounterVec {
	return newCounterVec("slo_refused_total",
		"Requests the gate refused because no engine was predicted to meet their time to first token target (slo_admission shed), by model, tenant and band.",
		"model", "tenant", "band")
}
