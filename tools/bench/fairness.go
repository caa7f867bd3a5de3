package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/caddy-mlc/caddy-mlc/fleet"
)

// The fairness run (-fairness, issue 23): two tenants share one
// mlc_router that spawns two built-in engines, as a shared fleet's
// operator would run it. Tenant A floods the engines with long streams;
// tenant B sends short ones. Each scenario runs twice, interleaved: on a
// router whose gate holds back what the engines cannot start (the
// default: each engine runs its batch, the rest waits in the router's
// fair queue), and on one without (max_inflight off: every request goes
// to an engine at once, and waits in the engine's FIFO). Only the gate's
// router is held to the goals; the other shows what they change.

// The fleet of the fairness run, and how a request says whose it is.
const (
	fairEngines    = 2
	fairBatch      = 8 // each engine's max_num_sequence
	headerTenant   = "X-Tenant"
	headerPriority = "X-Priority"
	bMinTokens     = 8 // B's max_tokens, drawn from [bMinTokens, bMaxTokens]
	bMaxTokens     = 16
)

// goalFairShare is the most B's TTFT p50 may be of A's, gate on, where a
// scenario has a goal (issue 23).
const goalFairShare = 0.2

// Deadlines of the fairness run's phases.
const (
	saturateTimeout = 2 * time.Minute  // A's flood to fill the engines
	windowTimeout   = 15 * time.Minute // a scenario's measured requests
	settleTimeout   = 3 * time.Minute  // the window's requests to end; a router to empty
	pollEvery       = 20 * time.Millisecond
)

// fairScenario is one shape of contention.
type fairScenario struct {
	name     string
	flood    int // A's streams, band 0; 0: A sends nothing
	bStreams int // B's streams
	bBand    int
	goal     float64 // B's TTFT p50 over A's, at most, gate on; 0: none
}

// scenarios are the fairness run's, in the order they run.
//
// With several replicas the goal is issue 28's, A flooding through every
// replica and B through one; priority bands order requests within a
// replica only (each replica's gate holds its share of the batch), so the
// banded scenario is measured without a goal.
func (c *config) scenarios() []fairScenario {
	bandGoal := goalFairShare
	if c.replicas > 1 {
		bandGoal = 0
	}
	return []fairScenario{
		{name: "B alone", bStreams: 1},
		{name: "A floods", flood: c.flood, bStreams: 1, goal: goalFairShare},
		{name: "both flood, B in band 1", flood: c.flood, bStreams: c.bStreams, bBand: 1, goal: bandGoal},
	}
}

// gatedRouter is a Caddy of the fairness run, with its gate on or off.
type gatedRouter struct {
	gate  bool
	caddy *caddyProc
	http  *http.Client

	// With -replicas N > 1: every replica, caddy the one that spawns the
	// engines; gate then says whether they share their gates (the
	// cluster option). A's streams take them in turn, B uses the last.
	replicas []*caddyProc
}

// base is where stream i of tenant sends its requests.
func (r *gatedRouter) base(tenant string, i int) string {
	switch {
	case len(r.replicas) < 2:
		return r.caddy.base
	case tenant == "B":
		return r.replicas[len(r.replicas)-1].base
	}
	return r.replicas[i%len(r.replicas)].base
}

// runFairness runs every scenario on a router with its gate and on one
// without, and prints the table.
func (b *bench) runFairness(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	var routers []*gatedRouter
	for _, gate := range []bool{true, false} {
		start := b.startGatedRouter
		if cfg.replicas > 1 {
			start = func(ctx context.Context, share bool) (*gatedRouter, error) {
				return b.startReplicas(ctx, cfg.replicas, share)
			}
		}
		r, err := start(ctx, gate)
		if err != nil {
			return err
		}
		routers = append(routers, r)
	}
	progressf("two routers serving, each with its two engines; measuring (work directory %s)", b.work)
	var results []fairResult
	for _, sc := range cfg.scenarios() {
		for _, r := range routers {
			res, err := r.measure(ctx, cfg, sc)
			res.replicas = len(r.replicas)
			if err != nil {
				return err
			}
			load.sample()
			progressf("%s", res.summary())
			results = append(results, res)
		}
	}
	b.procs.stopAll()
	load.sample()
	writeFairness(stdout, args, cfg, results, load, time.Since(started))
	return fairVerdict(results, cfg.check)
}

// startGatedRouter starts a Caddy whose mlc_router spawns its own two
// engines, and waits until it serves a completion.
func (b *bench) startGatedRouter(ctx context.Context, gate bool) (*gatedRouter, error) {
	ports, err := freePorts(fairEngines)
	if err != nil {
		return nil, err
	}
	name := "gate-on"
	if !gate {
		name = "gate-off"
	}
	c, err := b.startCaddy(ctx, name, mlcTenants(ports, gate), false)
	if err != nil {
		return nil, err
	}
	if err := newParty(name, name, c).waitServing(ctx); err != nil {
		return nil, err
	}
	return &gatedRouter{gate: gate, caddy: c, http: newClient(256)}, nil
}

// measure runs one scenario: A's flood first, until the engines are
// saturated; then B. The window holds the requests that began after
// that, until each tenant has cfg.samples of them answered; every one
// of them runs to its end with the load still on.
func (r *gatedRouter) measure(ctx context.Context, cfg *config, sc fairScenario) (fairResult, error) {
	res := fairResult{scenario: sc, gate: r.gate}
	if err := r.waitIdle(ctx); err != nil {
		return res, err
	}
	loadCtx, stop := context.WithCancel(ctx)
	var tenants []*tenantLoad // B first
	defer func() {
		stop()
		for _, l := range tenants {
			l.wait()
		}
	}()
	var a *tenantLoad
	if sc.flood > 0 {
		a = startTenant(loadCtx, r, "A", 0, sc.flood, cfg, func(*rand.Rand) int { return cfg.floodTokens })
		tenants = append(tenants, a)
		if err := r.waitSaturated(ctx, a); err != nil {
			return res, err
		}
	}
	since := time.Now()
	bl := startTenant(loadCtx, r, "B", sc.bBand, sc.bStreams, cfg, func(rng *rand.Rand) int {
		return bMinTokens + rng.IntN(bMaxTokens-bMinTokens+1)
	})
	tenants = append([]*tenantLoad{bl}, tenants...)
	err := poll(ctx, windowTimeout, func() (bool, error) {
		enough := true
		for _, l := range tenants {
			if l.failed() >= cfg.samples {
				return true, nil // enough to show what fails
			}
			enough = enough && l.answered(since) >= cfg.samples
		}
		return enough, nil
	})
	if err != nil {
		return res, fmt.Errorf("%s: %w", res.title(), err)
	}
	until := time.Now()
	if res.status, err = r.status(ctx); err != nil {
		return res, err
	}
	err = poll(ctx, settleTimeout, func() (bool, error) {
		for _, l := range tenants {
			if l.open(since, until) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return res, fmt.Errorf("%s: the window's requests to end: %w", res.title(), err)
	}
	stop()
	for _, l := range tenants {
		l.wait()
	}
	res.window = until.Sub(since)
	res.b = bl.figures(since, until)
	if a != nil {
		res.a = a.figures(since, until)
	}
	for _, l := range tenants {
		n, first := l.failures()
		res.failures += n
		if res.firstErr == nil {
			res.firstErr = first
		}
	}
	return res, ctx.Err()
}

// status reads the router's own account of its gate and engines; with
// several replicas, their sum: each engine's in flight, the gate's in
// flight and waiting, the queue.
func (r *gatedRouter) status(ctx context.Context) (fleet.ModelStatus, error) {
	if len(r.replicas) < 2 {
		return caddyStatus(ctx, r.caddy)
	}
	var sum fleet.ModelStatus
	for i, c := range r.replicas {
		st, err := caddyStatus(ctx, c)
		if err != nil {
			return sum, err
		}
		if i == 0 {
			sum = st
			sum.Engines = append([]fleet.EngineStatus(nil), st.Engines...)
			continue
		}
		if len(st.Engines) != len(sum.Engines) {
			return sum, fmt.Errorf("%s/mlc/engines: %d engines, the first replica %d", c.admin, len(st.Engines), len(sum.Engines))
		}
		for j, e := range st.Engines {
			sum.Engines[j].InFlight += e.InFlight
		}
		sum.Queued += st.Queued
		sum.Gate.Waiting += st.Gate.Waiting
		sum.Gate.InFlight += st.Gate.InFlight
	}
	return sum, nil
}

// caddyStatus reads one Caddy's router status.
func caddyStatus(ctx context.Context, c *caddyProc) (fleet.ModelStatus, error) {
	body, err := c.adminGet(ctx, "/mlc/engines", adminTimeout)
	if err != nil {
		return fleet.ModelStatus{}, err
	}
	var st []fleet.ModelStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fleet.ModelStatus{}, fmt.Errorf("%s/mlc/engines: %w", c.admin, err)
	}
	if len(st) != 1 {
		return fleet.ModelStatus{}, fmt.Errorf("%s/mlc/engines: %d routers, want 1", c.admin, len(st))
	}
	return st[0], nil
}

// saturated says whether every engine slot is taken and more requests
// wait, in the router's gate or in the engines' own queues.
func saturated(st fleet.ModelStatus) bool {
	inFlight := int64(0)
	for _, e := range st.Engines {
		inFlight += e.InFlight
	}
	slots := int64(fairEngines * fairBatch)
	return len(st.Engines) == fairEngines && inFlight >= slots && (st.Gate.Waiting > 0 || inFlight > slots)
}

// idle says whether the router holds no request, and its engines, by
// their last report, run none (a stream the bench cut short at the end
// of the scenario before ends on the engine a moment later).
func idle(st fleet.ModelStatus) bool {
	for _, e := range st.Engines {
		if e.InFlight > 0 || e.Load != nil && e.Load.Running+e.Load.Waiting > 0 {
			return false
		}
	}
	return st.Queued == 0 && st.Gate.Waiting == 0 && st.Gate.InFlight == 0
}

// waitSaturated waits until A's flood fills the engines.
func (r *gatedRouter) waitSaturated(ctx context.Context, a *tenantLoad) error {
	var last fleet.ModelStatus
	err := poll(ctx, saturateTimeout, func() (bool, error) {
		if n, first := a.failures(); n > 0 {
			return false, fmt.Errorf("the flood of tenant A: %d requests failed, the first: %w", n, first)
		}
		st, err := r.status(ctx)
		last = st
		return err == nil && saturated(st), err
	})
	if err != nil {
		return fmt.Errorf("gate %s: A's flood never saturated the engines (last: gate %+v): %w", onOff(r.gate), last.Gate, err)
	}
	return nil
}

// waitIdle waits until the router holds nothing of the scenario before.
func (r *gatedRouter) waitIdle(ctx context.Context) error {
	err := poll(ctx, settleTimeout, func() (bool, error) {
		st, err := r.status(ctx)
		return err == nil && idle(st), err
	})
	if err != nil {
		return fmt.Errorf("gate %s: the router to be idle: %w", onOff(r.gate), err)
	}
	return nil
}

// poll calls cond every pollEvery until it is true, fails, or timeout
// passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, err := cond()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
