package caddymlc

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// While the mlc app starts a fleet (Caddy's load waits for it), the
// engine list shows its engines as the log does: starting, with their
// PIDs and how long they have been starting, not "not started".
func TestStatusWhileStarting(t *testing.T) {
	ports := freePorts(t, 2)
	cf := fmt.Sprintf(`{
	admin off
	auto_https off
}
http://127.0.0.1:%d {
	mlc_router {
		model tiny
		mode whole
		engine command /bin/sh -c "exec sleep 60"
		startup_timeout 30s
		endpoint 127.0.0.1:%d
	}
}
`, ports[0], ports[1])
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- caddy.Load(cfg, true) }()
	var e fleet.EngineStatus
	waitFor(t, "the engine to show as starting", func() bool {
		st := liveNow().lifecycle.Statuses()
		if len(st) != 1 || len(st[0].Engines) != 1 {
			return false
		}
		e = st[0].Engines[0]
		return e.State == "starting" && e.PID > 0
	})
	if e.Elapsed == "" || e.Since == nil {
		t.Fatalf("a starting engine without its elapsed time: %+v", e)
	}
	// The engine dies while it starts: the start fails, and the load
	// with it.
	if err := syscall.Kill(e.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err == nil {
		t.Fatal("the load succeeded with its only engine killed while it started")
		stopCaddy(t)
	}
	if st := liveNow().lifecycle.Statuses(); len(st) != 0 {
		t.Fatalf("routers left after the failed load: %+v", st)
	}
}
