package router

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// A load report that comes with a request's end stands for a poll: the
// engine is not polled again within the poll interval. An engine whose
// poll answers no load (MLC's) is asked again only after
// noLoadPollInterval, unless its PE is still to be learnt.
func TestLoadReportsSparePolls(t *testing.T) {
	lf := externalFleet(t, 1) // its engine answers every call with no load
	// A copy of the fleet's engine, which the fleet's own poller does not
	// touch while the test reads and writes its state.
	fleetU := lf.upstreams[0]
	u := &Upstream{pool: lf.Pool, index: fleetU.index, addr: fleetU.addr, url: fleetU.url}
	u.pe.Store(fleetU.pe.Load())
	now := time.Now()
	if !u.pollDue(now) {
		t.Fatal("an engine that never reported is not polled")
	}
	extra := map[string]json.RawMessage{"running": json.RawMessage("3"), "waiting": json.RawMessage("2"),
		"blocked": json.RawMessage("1"), "kv_pages_free": json.RawMessage("40"), "kv_pages_total": json.RawMessage("64")}
	if !u.report(extra, 1) {
		t.Fatal("a report with the load fields was not taken")
	}
	l := u.load.Load()
	if l.Running != 3 || l.Waiting != 2 || l.Blocked != 1 || l.PagesFree != 40 || l.ownAtPoll != 1 {
		t.Fatalf("recorded %+v", l)
	}
	if u.pollDue(l.at.Add(engine.LoadPollInterval / 2)) {
		t.Fatal("polled though a request's end reported the load just now")
	}
	if !u.pollDue(l.at.Add(engine.LoadPollInterval)) {
		t.Fatal("not polled once the report is a poll interval old")
	}
	if u.report(map[string]json.RawMessage{"prefix_matched_length": json.RawMessage("0")}, 0) || u.load.Load() != l {
		t.Fatal("a usage without load replaced the report")
	}

	// The engine's poll answer has no load: polled again only much later.
	u.load.Store(nil)
	answer, err := engine.QueryLoad(context.Background(), &http.Client{Timeout: 5 * time.Second}, u.url)
	if err != nil {
		t.Fatal(err)
	}
	u.answered(answer)
	if u.unreported.Load() == 0 {
		t.Fatal("an answer without load not noted")
	}
	now = time.Now()
	if u.pollDue(now) || !u.pollDue(now.Add(noLoadPollInterval)) {
		t.Fatalf("engine without load: due now %v, due after %v %v", u.pollDue(now), noLoadPollInterval, u.pollDue(now.Add(noLoadPollInterval)))
	}
	pe := u.pe.Load()
	u.pe.Store(-1)
	if !u.pollDue(now) {
		t.Fatal("an engine whose PE is unknown is not polled")
	}
	u.pe.Store(pe)
	if !u.report(extra, 0) || u.unreported.Load() != 0 {
		t.Fatal("a report did not end the slow polling")
	}
}
