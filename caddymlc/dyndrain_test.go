package caddymlc

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
)

// dynamicEngine is the discovered engine at addr in GET /mlc/engines.
func dynamicEngine(addr string) (fleet.EngineStatus, bool) {
	for _, rs := range liveNow().lifecycle.Statuses() {
		for _, e := range rs.Engines {
			if e.Dynamic && e.Addr == addr {
				return e, true
			}
		}
	}
	return fleet.EngineStatus{}, false
}

// An engine that leaves DNS under streams is drained, not cut: it takes
// no new request, its streams run on there for the drain grace (Caddy's
// grace_period), then move to the other engine and finish exactly; once
// nothing runs on it, it is let go and its KV is free.
func TestDynamicEngineGoneDrains(t *testing.T) {
	port := testnet.FreePort(t)
	ips := []string{"127.0.0.2", "127.0.0.3"}
	startWorld(t, port, ips...)
	at := func(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	d := startDNS(t)
	d.set("engines.test.", ips...)
	httpPort := testnet.FreePort(t)
	loadCaddyfile(t, fmt.Sprintf(`{
	admin off
	auto_https off
	grace_period 400ms
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		dynamic a engines.test. %d {
			refresh 100ms
			resolvers %s
		}
	}
}
`, httpPort, port, d.addr))
	waitRoles(t, map[string]string{at(ips[0]): "any", at(ips[1]): "any"})
	s := &site{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), client: httpClient()}

	const streams, maxTokens = 8, 400
	prompt := func(i int) string { return fmt.Sprintf("the %d ferrymen who crossed the river at night", i) }
	bodies, want := make([]map[string]any, streams), make([]string, streams)
	for i := range want {
		bodies[i] = greedy(prompt(i), maxTokens)
		want[i] = reference(s, "http://"+at(ips[0]), bodies[i])
	}
	gone := at(ips[1])
	finish := s.exactStreams(s.base, bodies, want)
	e, _ := dynamicEngine(gone)
	d.set("engines.test.", ips[0])
	waitFor(t, "the gone engine to drain", func() bool {
		e, ok := dynamicEngine(gone)
		return ok && e.Drain != ""
	})
	finish()
	if e.InFlight == 0 {
		t.Fatal("no stream ran on the engine that left: the test tested nothing")
	}
	t.Logf("%d of %d streams on the engine when it left DNS", e.InFlight, streams)
	waitFor(t, "the gone engine to be let go", func() bool {
		_, ok := dynamicEngine(gone)
		return !ok
	})
	for i := range 2 {
		short := greedy(prompt(i), 16)
		if err := s.streamExact(s.base, short, reference(s, "http://"+at(ips[0]), short), func() {}); err != nil {
			t.Errorf("after: %v", err)
		}
	}
	waitFor(t, "its KV pages to return", func() bool {
		m := engineMetrics(t, "http://"+gone)
		return m["kv_pages_used"] == 0 && m["running"] == 0
	})
}
