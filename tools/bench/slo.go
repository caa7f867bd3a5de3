package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// The goodput run (-slo, issue 30): three built-in engines, one of them
// slower (protocol.Slowness, set through the engines' /builtin/slowness),
// serve a mixed workload through two Caddys over the same engines, one
// per policy (slo_aware, least_loaded). Short chat turns carry tight
// latency targets, long prompts loose ones; the request rate rises in
// steps, each step measured on one router after the other. Goodput is
// the highest rate at which at least sloGoal of the requests met their
// targets. Then the engines are made equal and the
// requests carry no targets: a closed loop compares the two policies'
// throughput, where slo_aware must choose as least_loaded does.

// The fleet of the goodput run: every engine's compute, and the slow
// one's, as a slower GPU would have it.
const (
	sloEngines     = 3
	fastPrefill    = 200 * time.Microsecond // per prompt token
	fastDecode     = 12 * time.Millisecond  // per decode step
	slowFactor     = 4
	sloGoal        = 0.9 // the share of requests that must meet their targets
	goalGoodput    = 1.5 // slo_aware's goodput over least_loaded's, at least
	goalThroughput = 0.95
	sloEqualConc   = 12 // the equal fleet's closed-loop streams
	sloEqualRounds = 4  // the equal fleet's turns per policy, interleaved
)

// sloClass is one kind of request of the mix.
type sloClass struct {
	name       string
	share      float64 // of the requests
	promptLen  int
	maxTokens  int
	ttft, tpot time.Duration
}

// sloMix is the workload: chat turns (short, with the example
// of tight targets: the first token within 300 ms, 20 tokens a second)
// and document prompts (long, loose targets).
var sloMix = []sloClass{
	{name: "chat", share: 0.6, promptLen: 24, maxTokens: 16, ttft: 300 * time.Millisecond, tpot: 50 * time.Millisecond},
	{name: "long", share: 0.4, promptLen: 384, maxTokens: 16, ttft: 3 * time.Second, tpot: 300 * time.Millisecond},
}

// The policies compared, the first held to the goals.
var sloPolicies = []string{"slo_aware", "least_loaded"}

// sloRouter is a Caddy of the goodput run.
type sloRouter struct {
	policy string
	caddy  *caddyProc
	http   *http.Client
}

// runSLO runs the goodput steps and the equal-fleet comparison, and
// prints the tables.
func (b *bench) runSLO(ctx context.Context, cfg *config, args []string, stdout io.Writer, load *loadWatch, started time.Time) error {
	engines, err := b.startEngines(ctx, sloEngines)
	if err != nil {
		return err
	}
	var routers []*sloRouter
	for _, p := range sloPolicies {
		c, err := b.startCaddy(ctx, p, mlcPolicy(engines, p), false)
		if err != nil {
			return err
		}
		if err := newParty(p, p, c).waitServing(ctx); err != nil {
			return err
		}
		routers = append(routers, &sloRouter{policy: p, caddy: c, http: newClient(512)})
	}
	if err := setSlowness(ctx, engines, engines[len(engines)-1]); err != nil {
		return err
	}
	progressf("three engines (%s the slower, %dx), a Caddy per policy; rising rate (work directory %s)", engines[len(engines)-1], slowFactor, b.work)
	var steps []sloStep
	for i, rate := range cfg.sloRates {
		for k := range routers {
			r := routers[(i+k)%len(routers)] // who goes first alternates
			st, err := r.step(ctx, cfg, rate)
			if err != nil {
				return err
			}
			load.sample()
			progressf("%s", st.summary())
			steps = append(steps, st)
		}
	}
	if err := setSlowness(ctx, engines, ""); err != nil {
		return err
	}
	equal := make([]sloEqual, len(routers))
	for round := range sloEqualRounds {
		for k := range routers {
			i := (round + k) % len(routers) // who goes first alternates
			if err := routers[i].equal(ctx, cfg, cfg.sloStep/sloEqualRounds, &equal[i]); err != nil {
				return err
			}
		}
	}
	for _, eq := range equal {
		progressf("equal fleet, no targets, %s: %.1f req/s, TTFT p50 %v", eq.policy, eq.rps, eq.ttftP50)
	}
	b.procs.stopAll()
	load.sample()
	writeSLO(stdout, args, cfg, steps, equal, load, time.Since(started))
	return sloVerdict(steps, equal, cfg.check)
}

// mlcPolicy is the goodput run's router: mode whole over the external
// engines, with policy.
func mlcPolicy(engines []string, policy string) string {
	return mlcWhole(external(engines), "policy "+policy)
}

// step runs the mix at rate requests a second for the step's time, and
// waits for its requests to end.
func (r *sloRouter) step(ctx context.Context, cfg *config, rate float64) (sloStep, error) {
	st := sloStep{policy: r.policy, rate: rate}
	if err := r.waitIdle(ctx); err != nil {
		return st, err
	}
	rng := rand.New(rand.NewPCG(cfg.seed, uint64(rate*1000)))
	st.samples = openLoop(ctx, r, rng, rate, cfg.sloStep)
	return st, ctx.Err()
}

// waitIdle waits until the router holds nothing of the step before.
func (r *sloRouter) waitIdle(ctx context.Context) error {
	err := poll(ctx, settleTimeout, func() (bool, error) {
		st, err := caddyStatus(ctx, r.caddy)
		return err == nil && idle(st), err
	})
	if err != nil {
		return fmt.Errorf("%s: the router to be idle: %w", r.policy, err)
	}
	return nil
}

// setSlowness gives every engine the fast compute, and slow (unless "")
// slowFactor times more.
func setSlowness(ctx context.Context, engines []string, slow string) error {
	for _, e := range engines {
		f := time.Duration(1)
		if e == slow {
			f = slowFactor
		}
		body := fmt.Sprintf(`{"prefill_delay_us": %d, "decode_delay_us": %d}`, (f * fastPrefill).Microseconds(), (f * fastDecode).Microseconds())
		if _, err := call(ctx, http.MethodPost, "http://"+e+"/builtin/slowness", []byte(body), adminTimeout, 1<<20); err != nil {
			return err
		}
	}
	return nil
}
