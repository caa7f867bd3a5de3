package fleet

import (
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/enginetest"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// TestMain lets the test binary be the engine program.
func TestMain(m *testing.M) { enginetest.Main(m) }

// core is a router over a fleet of built-in engines of the tiny model,
// served by httptest, and the lifecycle of its engines: what the
// caddymlc adapter makes of a config, without Caddy.
type core struct {
	r       *router.Router
	fleet   *Fleet
	live    *router.Live
	lc      *Lifecycle
	base    string   // the router's URL
	engines []string // the engines' URLs
}

// startCore starts n built-in engines and a router of mode over them (in
// disagg, the first prefills, the others decode).
func startCore(t testing.TB, n int, mode string) *core {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &core{live: router.NewLive()}
	c.lc = New(c.live)
	var eps []engine.Endpoint
	for _, p := range testnet.FreePorts(t, n) {
		eps = append(eps, engine.Endpoint{Host: "127.0.0.1", Port: p, GPUs: 1})
		c.engines = append(c.engines, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	spec := engine.Spec{Model: "tiny", Kind: engine.KindBuiltin, Program: exe, PrefixCacheMode: engine.PrefixCacheDisable,
		Endpoints: eps, StartupTimeout: time.Minute}.Normalize()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.fleet, err = c.lc.NewFleet(spec, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	if err := c.fleet.LaunchNow(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Retire(c.fleet, true) })
	handle := router.NewHandle(spec)
	handle.Set(c.fleet.Pool())
	cfg := router.Config{Model: "tiny", Path: "tiny", EngineKind: engine.KindBuiltin, Mode: mode, Endpoints: eps,
		MaxAttempts: router.DefaultMaxAttempts, MaxBodySize: protocol.DefaultMaxBodyBytes, EngineTimeout: router.DefaultEngineTimeout,
		QueueTimeout: router.DefaultQueueTimeout, QueueSize: router.DefaultQueueSize, BodyTimeout: router.DefaultBodyTimeout,
		ClientTimeout: router.DefaultClientTimeout, MaxPrefillQueue: router.DefaultMaxPrefillQueue}
	if c.r, err = router.New(cfg, router.Options{Live: c.live, Handle: handle}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.r.Close)
	srv := httptest.NewServer(router.NewModels([]*router.Router{c.r}, 0))
	t.Cleanup(srv.Close)
	c.base = srv.URL
	return c
}

// engineStatus is engine i of the router's status.
func (c *core) engineStatus(i int) EngineStatus { return status(c.r).Engines[i] }

// migrated counts the attempts the routers moved off a drained engine
// (caddy_mlc_retries_total{cause="migrate"}).
func migrated(t testing.TB) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := router.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "caddy_mlc_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == "migrate" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
