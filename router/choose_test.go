package router

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// externalFleet starts a live fleet of n external engines that answer
// their health checks, and waits until all are ready.
func externalFleet(t *testing.T, n int) *testFleet {
	t.Helper()
	return fleetServing(t, n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","data":[]}`))
	}))
}

// fleetServing starts a live fleet of n external engines served by h,
// which answers their health checks too, and waits until all are ready.
func fleetServing(t *testing.T, n int, h http.Handler) *testFleet {
	t.Helper()
	var eps []engine.Endpoint
	for range n {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		eps = append(eps, engine.Endpoint{Host: host, Port: p, GPUs: 1, External: true})
	}
	lf, err := newTestFleet(NewLive(), engine.Spec{Model: "tiny", Endpoints: eps}.Normalize())
	if err != nil {
		t.Fatal(err)
	}
	if err := lf.launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lf.Shutdown)
	deadline := time.After(30 * time.Second)
	for {
		ch := lf.Changed()
		ready := 0
		for i := range n {
			if ok, _ := lf.upstreams[i].status(); ok {
				ready++
			}
		}
		if ready == n {
			return lf
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d external engines ready", ready, n)
		}
	}
}

// testRouter is a router over lf's engines (all of them, any role) with
// the given selection policy.
func testRouter(t *testing.T, lf *testFleet, policy Policy) *Router {
	t.Helper()
	r := queueRouter(time.Minute, 8)
	r.setPolicy(policy)
	r.handle.pool.Store(lf.Pool)
	r.roles = RoleIndexes(ModeWhole, lf.spec.Endpoints)
	return r
}

func TestPickSpreadsTiesAndPrefersTheLeastLoaded(t *testing.T) {
	lf := externalFleet(t, 3)
	r := testRouter(t, lf, LeastLoaded{})
	// Equal load: consecutive picks go round the engines.
	seen := map[int]bool{}
	for range 3 {
		l := r.pick("", pickOptions{})
		seen[l.index] = true
		l.release(nil)
	}
	if len(seen) != 3 {
		t.Fatalf("three picks at equal load chose %v", seen)
	}
	// Load: engines 0 and 1 hold two calls each, 2 one.
	var held []*lease
	for _, i := range []int{0, 0, 1, 1, 2} {
		release, _ := lf.upstreams[i].hold()
		held = append(held, &lease{proc: proc{Upstream: lf.upstreams[i]}, unhold: release})
	}
	if l := r.pick("", pickOptions{}); l.index != 2 {
		t.Fatalf("picked %d, want the least loaded (2)", l.index)
	} else {
		l.release(nil)
	}
	for _, h := range held {
		h.release(nil)
	}
	for i, u := range lf.upstreams {
		if n := u.inflight.Load(); n != 0 {
			t.Fatalf("engine %d: %d in flight after every release", i, n)
		}
	}
}

// A call that has not had its first token weighs twice: requests that
// arrive together do not all go to the engine that has just freed room,
// to queue there behind each other's prefills.
func TestPickWeighsCallsStillPrefilling(t *testing.T) {
	lf := externalFleet(t, 2)
	r := testRouter(t, lf, LeastLoaded{})
	var held []*lease
	for _, i := range []int{0, 0, 1, 1, 1, 1, 1} { // decoding: engine 0 two calls, engine 1 five
		l := &lease{proc: proc{Upstream: lf.upstreams[i]}}
		l.unhold, l.started = lf.upstreams[i].hold()
		l.firstToken()
		held = append(held, l)
	}
	first := r.pick("", pickOptions{})
	if first.index != 0 {
		t.Fatalf("picked %d, want the least loaded (0)", first.index)
	}
	// Engine 0 has three calls now, one of them prefilling: it weighs
	// 3+prefillWeight (7) against engine 1's five. (Were a prefilling call
	// to count only twice, engine 0 would weigh four and get the next one
	// too: two prefills in one step.)
	second := r.pick("", pickOptions{})
	if second.index != 1 {
		t.Fatalf("picked %d while engine 0 prefills, want 1", second.index)
	}
	// The first call's first token: engine 0 weighs three, engine 1 six
	// plus prefillWeight.
	first.firstToken()
	first.firstToken() // once only
	third := r.pick("", pickOptions{})
	if third.index != 0 {
		t.Fatalf("picked %d after engine 0's prefill, want 0", third.index)
	}
	for _, l := range append(held, first, second, third) {
		l.release(nil)
		l.release(nil)
	}
	for i, u := range lf.upstreams {
		if n, p := u.inflight.Load(), u.prefilling.Load(); n != 0 || p != 0 {
			t.Fatalf("engine %d: %d in flight, %d prefilling after every release", i, n, p)
		}
	}
}

func TestPickTiers(t *testing.T) {
	lf := externalFleet(t, 2)
	r := testRouter(t, lf, LeastLoaded{})
	u0, u1 := lf.upstreams[0], lf.upstreams[1]
	pick := func(o pickOptions) int {
		l := r.pick("", o)
		if l == nil {
			return -1
		}
		l.release(nil)
		return l.index
	}
	// An engine that failed this request is chosen only if nothing else
	// is; its restart (another process) is an engine like any other.
	_, pid0 := u0.status()
	_, pid1 := u1.status()
	for range 4 {
		if got := pick(pickOptions{avoid: map[string]bool{avoidKey(u0.addr, pid0): true}}); got != 1 {
			t.Fatalf("avoided engine chosen: %d", got)
		}
	}
	restarted := 0
	for range 4 {
		if pick(pickOptions{avoid: map[string]bool{avoidKey(u0.addr, pid0+1): true}}) == 0 {
			restarted++
		}
	}
	if restarted == 0 {
		t.Fatal("an engine avoided for a failure of the process before it is never chosen")
	}
	if got := pick(pickOptions{avoid: map[string]bool{avoidKey(u0.addr, pid0): true, avoidKey(u1.addr, pid1): true}}); got < 0 {
		t.Fatal("nothing chosen when every engine failed the request before")
	}
	// An engine with work its last step could not start (short of KV
	// pages) is passed over; so is one that reports only what waits, as
	// an engine without the blocked count does.
	withoutBlocked, ok := parseLoad(map[string]json.RawMessage{"waiting": json.RawMessage("1")})
	if !ok || withoutBlocked.Blocked != 1 {
		t.Fatalf("an engine reporting 1 waiting and no blocked count: %+v, %v", withoutBlocked, ok)
	}
	for _, l := range []engineLoad{{EngineLoad: protocol.EngineLoad{Waiting: 2, Blocked: 1}}, withoutBlocked} {
		l.at, l.PagesFree, l.PagesTotal = time.Now(), 100, 100
		u1.load.Store(&l)
		for range 4 {
			if got := pick(pickOptions{needPages: 1}); got != 0 {
				t.Fatalf("saturated engine chosen (%+v): %d", l, got)
			}
		}
	}
	// Work that has only arrived (it starts at the next step) is load,
	// not saturation: the engine stays in the tier and takes its turn.
	// Engine 1 has less of it than engine 0, so it is chosen unless
	// counted as saturated.
	u0.load.Store(&engineLoad{at: time.Now(), EngineLoad: protocol.EngineLoad{Waiting: 5, Blocked: 0, PagesFree: 100, PagesTotal: 100}})
	u1.load.Store(&engineLoad{at: time.Now(), EngineLoad: protocol.EngineLoad{Waiting: 3, Blocked: 0, PagesFree: 100, PagesTotal: 100}})
	for range 4 {
		if got := pick(pickOptions{needPages: 1}); got != 1 {
			t.Fatalf("chose engine %d: engine 1 has new work queued but nothing blocked, and less than engine 0", got)
		}
	}
	u0.load.Store(nil)
	// An engine whose pages are in its prefix cache has room: it evicts
	// them for new work. One without free or cached pages for the call
	// has none.
	u0.load.Store(&engineLoad{at: time.Now(), EngineLoad: protocol.EngineLoad{PagesFree: 0, PagesCached: 100, PagesTotal: 100}})
	u1.load.Store(&engineLoad{at: time.Now(), EngineLoad: protocol.EngineLoad{PagesFree: 10, PagesCached: 0, PagesTotal: 100}})
	for range 4 {
		if got := pick(pickOptions{needPages: 50}); got != 0 {
			t.Fatalf("chose engine %d: engine 0 has 100 cached pages to evict, engine 1 only 10 free", got)
		}
	}
	u0.load.Store(nil)
	u1.load.Store(nil)
	// A broken engine (breaker open) is a last resort; never with noBroken.
	for range breakerThreshold {
		u0.breaker.failure(pid0)
	}
	for range 4 {
		if got := pick(pickOptions{}); got != 1 {
			t.Fatalf("engine with an open breaker chosen: %d", got)
		}
	}
	if got := pick(pickOptions{exclude: u1}); got != 0 {
		t.Fatalf("with the other engine excluded, the broken one is the last resort; got %d", got)
	}
	if got := pick(pickOptions{exclude: u1, noBroken: true}); got != -1 {
		t.Fatalf("noBroken chose %d", got)
	}
}
