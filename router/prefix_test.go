package router

import (
	"fmt"
	"slices"
	"testing"
)

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func TestPrefixChainIsPerPrefix(t *testing.T) {
	a := prefixChain(seq(0, 40))
	if len(a) != 40/kvPageTokens {
		t.Fatalf("%d pages for 40 tokens", len(a))
	}
	b := prefixChain(append(seq(0, 16), seq(100, 24)...))
	if a[0] != b[0] || a[1] == b[1] {
		t.Fatalf("chains of prompts sharing one page: %x %x", a, b)
	}
	// A page hash names the whole prefix, not the page alone.
	c := prefixChain(append(seq(100, 16), seq(16, 16)...))
	if c[1] == a[1] {
		t.Fatal("the same second page after another first page hashes the same")
	}
	if !slices.Equal(prefixChain([]int{1 << 20, 3}), prefixChain([]int{1 << 20, 3})) {
		t.Fatal("not deterministic")
	}
}

func TestPrefixIndexMatchesLearnsAndForgetsLeavesFirst(t *testing.T) {
	var p prefixIndex
	long := prefixChain(seq(0, 64)) // 4 pages
	if p.match(long) != 0 {
		t.Fatal("an empty index matched")
	}
	p.learn(long, -1, 0)
	if got := p.match(long); got != 64 {
		t.Fatalf("match %d, want 64", got)
	}
	if got := p.match(prefixChain(append(seq(0, 32), seq(500, 32)...))); got != 32 {
		t.Fatalf("a prompt sharing 2 pages matched %d", got)
	}
	// Capacity: a new prompt pushes out the oldest pages, and of a
	// prompt's pages its last ones (leaves) go first.
	var q prefixIndex
	q.learn(long, -1, 4)
	other := prefixChain(seq(1000, 32))
	q.learn(other, -1, 4)
	if got := q.match(long); got != 32 {
		t.Fatalf("after eviction the old prompt matches %d tokens, want its first 2 pages (32)", got)
	}
	if got := q.match(other); got != 32 {
		t.Fatalf("the new prompt matches %d", got)
	}
}

func TestPrefixAwarePrefersTheWarmEngineUnlessBusy(t *testing.T) {
	lf := externalFleet(t, 2)
	r := testRouter(t, lf, PrefixAware{})
	prompt := seq(0, 1024)
	lf.upstreams[1].prefixes.learn(prefixChain(prompt), -1, 0)
	for range 4 {
		l := r.pick("", pickOptions{req: &Request{Prompt: prompt}})
		if l.index != 1 {
			t.Fatalf("prefix_aware chose engine %d, not the one holding the prompt", l.index)
		}
		l.release(nil)
	}
	// Busy enough that the prefix no longer pays: 9 calls cost more than
	// prefilling 1,024 tokens.
	var held []func()
	for range 1024/loadTokens + 1 {
		release, _ := lf.upstreams[1].hold()
		held = append(held, release)
	}
	l := r.pick("", pickOptions{req: &Request{Prompt: prompt}})
	if l.index != 0 {
		t.Fatalf("prefix_aware chose the busy engine %d", l.index)
	}
	l.release(nil)
	for _, h := range held {
		h()
	}
}

// An engine that matched less than the index expected evicted pages the
// index still held: the index keeps fewer pages from then on, and grows
// back towards the engine's capacity as its expectations come true.
func TestPrefixIndexLearnsWhatTheEngineKeeps(t *testing.T) {
	var p prefixIndex
	const capacity = 64
	for i := range 4 {
		p.learn(prefixChain(seq(i*1000, 16*16)), -1, capacity) // 4 prompts of 16 pages: 64
	}
	if p.lru.Len() != capacity {
		t.Fatalf("%d pages kept, capacity %d", p.lru.Len(), capacity)
	}
	p.correct(16*16, 0, capacity) // expected a whole prompt, the engine had none
	if p.lru.Len() >= capacity || p.limit >= capacity {
		t.Fatalf("after an eviction the index still keeps %d pages (limit %d)", p.lru.Len(), p.limit)
	}
	shrunk := p.limit
	for range 16 {
		p.correct(0, 0, capacity)
	}
	if p.limit <= shrunk || p.limit > capacity {
		t.Fatalf("limit %d after confirmations, %d before, capacity %d", p.limit, shrunk, capacity)
	}
}

// Pages routed to an engine count for routing at once, but only pages the
// engine is known to have computed count as what it should match: a
// request that finds nothing because its prefix is still being prefilled
// there (for an earlier request) is no eviction, and the index keeps its
// size.
func TestPrefixIndexTellsPendingFromHeld(t *testing.T) {
	var p prefixIndex
	const capacity = 64
	chain := prefixChain(seq(0, 16*16))
	p.learn(chain, -1, capacity)
	if got := p.match(chain); got != 16*16 {
		t.Fatalf("routing match %d, want the whole prompt (pending)", got)
	}
	if got := p.matchHeld(chain); got != 0 {
		t.Fatalf("held match %d before the engine computed anything", got)
	}
	p.learn(chain, -1, capacity) // a second request, while the first prefills
	p.correct(p.matchHeld(chain), 0, capacity)
	if p.limit != capacity {
		t.Fatalf("limit %d after a miss on pending pages, want %d", p.limit, capacity)
	}
	p.hold(chain)
	if got := p.matchHeld(chain); got != 16*16 {
		t.Fatalf("held match %d after the engine computed the prompt", got)
	}
	// Now a miss is an eviction.
	p.correct(p.matchHeld(chain), 0, capacity)
	if p.limit >= capacity {
		t.Fatalf("limit %d after a miss on held pages", p.limit)
	}
	// prep_recv's answer holds what it matched, and drops the held pages
	// beyond it.
	var q prefixIndex
	q.learn(chain, -1, capacity)
	q.hold(chain)
	q.learn(chain, 8*16, capacity)
	if got := q.matchHeld(chain); got != 8*16 {
		t.Fatalf("after prep_recv matched 8 pages the index holds %d tokens", got)
	}
	// Also pages the index had not recorded (another replica's prompt).
	var r prefixIndex
	r.learn(chain, 8*16, capacity)
	if got := r.matchHeld(chain); got != 8*16 {
		t.Fatalf("a fresh index holds %d tokens after prep_recv matched 8 pages", got)
	}
}

// Only a router whose policy reads the engines' prefix indexes keeps
// them: after the same request, prefix_aware's engine index holds the
// prompt's pages and least_loaded's holds nothing.
func TestOnlyPrefixAwareKeepsTheIndex(t *testing.T) {
	prompt := seq(5, 3*kvPageTokens)
	for _, tc := range []struct {
		policy Policy
		pages  int
	}{{PrefixAware{}, 3}, {LeastLoaded{}, 0}} {
		t.Run(fmt.Sprintf("%T", tc.policy), func(t *testing.T) {
			s := startCore(t, 1, Config{Mode: ModeWhole}, tc.policy)
			s.complete(s.base, greedy(prompt, 4))
			p := &s.fleet.upstreams[0].prefixes
			p.mu.Lock()
			n := len(p.pages)
			p.mu.Unlock()
			if n != tc.pages {
				t.Fatalf("the engine's prefix index holds %d pages after a prompt of 3, want %d", n, tc.pages)
			}
		})
	}
}
