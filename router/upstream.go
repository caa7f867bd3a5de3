package router

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// upstream is one engine as the routers see it: where it is, its first PE
// in the NVSHMEM world, what the routers have in flight on it, its circuit
// breaker and the load it last reported. Like reverse_proxy's hosts, it is
// shared: it lives with its fleet's Pool, so every router and
// every config that uses the fleet balances on the same counts, across
// reloads.
type Upstream struct {
	pool  *Pool
	index int // endpoint index in the fleet
	addr  string
	url   string
	// pe is the engine's first NVSHMEM PE, the recv_rank of a remote_send
	// to it: the spec's for the fleet's endpoints, what the engine reports
	// for discovered ones; -1 while unknown.
	pe atomic.Int64

	// inflight counts calls that hold the engine: a request holds its
	// decode engine from prep_recv to the end of its stream (which covers
	// the KV reservation), a prefill engine for its remote_send.
	inflight atomic.Int64
	// prefilling counts the calls in flight that have not had their
	// first token yet: their prefill is work the engine has still to do.
	prefilling atomic.Int64
	requests   atomic.Int64 // calls ever held, for operators
	breaker    breaker
	load       atomic.Pointer[engineLoad] // nil until the engine reports one
	// unreported is when a poll last found no load in the answer (unix
	// nanoseconds; 0: it did, or none did yet).
	unreported atomic.Int64
	ownAtAsk   atomic.Int64 // our inflight when the last poll asked
	prefixes   prefixIndex  // what its prefix cache is expected to hold
	// cacheCounts are what the routers expected it to hold and what it
	// reused (cacheaccount.go).
	cacheCounts cacheCounts
	// noRelease is set once the engine answered 404 to the release
	// extension (a real MLC engine): reservations are then given back
	// through MLC's own API.
	noRelease atomic.Bool
	// badStream is the reason the engine's last bad answer was logged
	// for; nil once it served a call well.
	badStream atomic.Pointer[string]
	// kv are its caddy_mlc_engine_kv_pages gauges (see kvGauges).
	kvOnce sync.Once
	kv     [3]prometheus.Gauge
	// lastTokenAt is when a call last got a token from the engine (unix
	// nanoseconds): a busy engine is not a silent one (see call.bark).
	lastTokenAt atomic.Int64
	// rotation is whether it takes new attempts, and those it has
	// (rotation.go).
	rotation rotation
	// latency is its latency model (latency.go).
	latency latencyModel
}

// tokenCame notes that a call got a token from the engine.
func (u *Upstream) tokenCame() { u.lastTokenAt.Store(time.Now().UnixNano()) }

// lastToken is when a call last got a token from the engine (callee).
func (u *Upstream) lastToken() time.Time { return time.Unix(0, u.lastTokenAt.Load()) }

// engineLoad is what an engine last said about its own load (the
// query_engine_metrics special request), with our own in-flight count at
// that moment, so that the requests of other Caddy replicas can be told
// from ours.
type engineLoad struct {
	protocol.EngineLoad
	at        time.Time
	ownAtPoll int64 // our inflight when the answer came
}

// prefixCapacity is how many KV pages the engine's prefix cache can hold
// at most: its KV capacity, when it reports one.
func (u *Upstream) prefixCapacity() int {
	if l := u.load.Load(); l != nil {
		return l.PagesTotal
	}
	return 0
}

// loadStale is how old a load report may be before it counts no more:
// three poll intervals. Others' work comes and goes fast; a report that
// outlived it would keep traffic off an engine that is idle now.
const loadStale = 3 * engine.LoadPollInterval

// status returns the engine's fleet state and process.
func (u *Upstream) status() (ready bool, pid int) {
	st, pid := u.pool.procs.Status(u.index)
	return st == engine.StateReady, pid
}

// hold counts one more call on the engine and returns the functions that
// count it back: release, at the call's end, and started, called at the
// call's first token, which ends its prefill (Candidate.Prefilling).
func (u *Upstream) hold() (release, started func()) {
	m := sharedMetrics()
	gauge := m.inflight.WithLabelValues(u.addr)
	gauge.Set(float64(u.inflight.Add(1)))
	u.prefilling.Add(1)
	u.requests.Add(1)
	m.engineRequests.WithLabelValues(u.addr).Inc()
	u.pool.held(1)
	var released, begun atomic.Bool
	started = func() {
		if begun.CompareAndSwap(false, true) {
			u.prefilling.Add(-1)
		}
	}
	release = func() {
		if released.CompareAndSwap(false, true) {
			started()
			n := u.inflight.Add(-1)
			gauge.Set(float64(n))
			u.pool.held(-1)
			if n == 0 {
				u.rotation.idle.notify()
			}
		}
	}
	return release, started
}

// calls is the engine's work in calls: our own calls in flight plus the
// work the engine last reported that is not ours (see engineLoad.others).
func (u *Upstream) calls(now time.Time) float64 {
	return float64(u.inflight.Load()) + u.load.Load().others(now)
}

// others is the work the report counts that is not ours (other replicas,
// reservations not yet released); 0 for no report. Our own count is
// exact and current; a report is a sample, so what it adds fades as it
// ages: work that was there a second ago has likely ended, and a stale
// report must not keep traffic off an engine that is idle now.
func (l *engineLoad) others(now time.Time) float64 {
	if l == nil {
		return 0
	}
	age := now.Sub(l.at)
	if age >= loadStale {
		return 0
	}
	theirs := float64(int64(l.Running+l.Waiting+l.Prepared) - l.ownAtPoll)
	return max(theirs, 0) * (1 - float64(age)/float64(loadStale))
}

// view is the engine as a policy sees it, chosen for role in tier.
func (u *Upstream) view(now time.Time, role string, tier Tier) Candidate {
	c := Candidate{Engine: u, Addr: u.addr, Role: role, Tier: tier,
		InFlight: int(u.inflight.Load()), Prefilling: int(u.prefilling.Load()), PrefixHit: -1}
	if l := u.load.Load(); l != nil && now.Sub(l.at) < loadStale {
		c.Others = l.others(now)
		c.Load = EngineLoad{At: l.at, Running: l.Running, Waiting: l.Waiting, Blocked: l.Blocked, Prepared: l.Prepared,
			PagesUsed: max(l.PagesTotal-l.PagesFree-l.PagesCached, 0), PagesFree: l.PagesFree,
			PagesCached: l.PagesCached, PagesTotal: l.PagesTotal}
	}
	return c
}

// Addr is the engine's host:port (Engine).
func (u *Upstream) Addr() string { return u.addr }

// internal is the engine itself (Engine).
func (u *Upstream) internal() *Upstream { return u }

// saturated reports that the engine said it cannot take needPages more KV
// pages now, or already has work it could not start for want of pages:
// work sent there would queue behind held pages. Work that has only
// arrived does not count: an engine under load always has some between
// two steps, and passing it over for that sends every request for a
// poll's while to the other engines, in bursts.
func (u *Upstream) saturated(now time.Time, needPages int) bool {
	l := u.load.Load()
	if l == nil || now.Sub(l.at) > loadStale || l.PagesTotal == 0 {
		return false
	}
	return l.Blocked > 0 || l.PagesFree+l.PagesCached < needPages
}
