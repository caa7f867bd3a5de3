package router

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// Cache-aware disaggregation: under prefix_aware the prefill engine is
// chosen by its own prefix index, as the generating engine is in whole
// mode. A session whose prompt grows turn by turn keeps landing on the
// prefill engine that holds its head, which computes only each turn's
// new tokens while the other computes nothing, though it is busier; once
// it is busier than the head is worth, the session moves, and the move
// is counted.
func TestDisaggPrefillFollowsTheSessionsPrefix(t *testing.T) {
	roles := []engine.Endpoint{{Role: engine.RolePrefill}, {Role: engine.RolePrefill}, {Role: engine.RoleDecode}}
	c := startCore(t, 3, Config{Mode: ModeDisagg, MaxPrefillQueue: -1, Endpoints: roles, PrefixCache: engine.PrefixCacheRadix}, PrefixAware{})
	computed := func() [2]int {
		return [2]int{int(engineMetrics(t, c.engines[0])["prefill_tokens"]), int(engineMetrics(t, c.engines[1])["prefill_tokens"])}
	}
	prompt := seq(11, 40*kvPageTokens+3) // the session's head
	before := computed()
	usageOfCall(t, c.base, greedy(prompt, 4), false)
	after := computed()
	holder := 0
	if after[1] > before[1] {
		holder = 1
	}
	if after[holder]-before[holder] < len(prompt)-1 || after[1-holder] != before[1-holder] {
		t.Fatalf("the first turn: prefill engines computed %v, then %v", before, after)
	}
	// A call in flight there weighs less than the head saves: it stays.
	hold, _ := c.fleet.upstreams[holder].hold()
	busy := sync.OnceFunc(hold)
	defer busy()
	for turn := 1; turn <= 4; turn++ {
		prompt = append(prompt, seq(300+turn*50, 2*kvPageTokens+7)...)
		before := computed()
		u := usageOfCall(t, c.base, greedy(prompt, 4), turn%2 == 0)
		after := computed()
		if after[1-holder] != before[1-holder] {
			t.Fatalf("turn %d: the engine without the head computed %d tokens", turn, after[1-holder]-before[1-holder])
		}
		if new := after[holder] - before[holder]; new > 3*kvPageTokens+7 || u.PromptTokensDetails.CachedTokens < len(prompt)-new-1 {
			t.Fatalf("turn %d: the holder computed %d of %d tokens; %d cached", turn, new, len(prompt), u.PromptTokensDetails.CachedTokens)
		}
	}

	busy()

	// Busy by more than the head is worth: the session moves, counted.
	moves := sharedMetrics().cache.moves.WithLabelValues(moveLoad)
	moved := testutil.ToFloat64(moves)
	pre := c.fleet.upstreams[holder]
	for range len(prompt)/loadTokens + 2 {
		release, _ := pre.hold()
		defer release()
	}
	before = computed()
	prompt = append(prompt, seq(900, kvPageTokens)...)
	usageOfCall(t, c.base, greedy(prompt, 4), false)
	after = computed()
	if after[1-holder] == before[1-holder] || after[holder] != before[holder] {
		t.Fatalf("a busy holder: prefill engines computed %v, then %v", before, after)
	}
	if testutil.ToFloat64(moves) != moved+1 {
		t.Fatalf("caddy_mlc_prefix_moves_total{reason=load} went from %v to %v", moved, testutil.ToFloat64(moves))
	}
}
