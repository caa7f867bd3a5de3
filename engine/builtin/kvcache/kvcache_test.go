package kvcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// seqTokens returns n tokens starting at first.
func seqTokens(first, n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = first + i
	}
	return t
}

func allocN(t *testing.T, p *Pool, n int) []int {
	t.Helper()
	var pages []int
	for i := range n {
		pg, ok := p.Alloc()
		if !ok {
			t.Fatalf("Alloc %d of %d failed: %+v", i, n, p.Stats())
		}
		pages = append(pages, pg)
	}
	return pages
}

func TestAllocRelease(t *testing.T) {
	p := NewPool(4, 2, 8, false)
	pages := allocN(t, p, 4)
	if _, ok := p.Alloc(); ok {
		t.Fatal("Alloc beyond the pool succeeded")
	}
	if s := p.Stats(); s.Used != 4 || s.Free != 0 {
		t.Fatalf("%+v", s)
	}
	p.Retain(pages[0])
	p.ReleaseAll(pages)
	if s := p.Stats(); s.Used != 1 || s.Free != 3 {
		t.Fatalf("after release: %+v", s)
	}
	p.Release(pages[0])
	if s := p.Stats(); s != (Stats{Free: 4, Total: 4}) {
		t.Fatalf("all released: %+v", s)
	}
}

func TestPrefixMatchAndShare(t *testing.T) {
	p := NewPool(8, 1, 2, true)
	tokens := seqTokens(100, 40) // two full pages and a partial one
	pages := allocN(t, p, 3)
	for slot := range 3 * PageSize {
		p.KV.K[0][pages[slot/PageSize]*PageSize*2+slot%PageSize*2] = float32(slot)
	}
	p.Insert(tokens, pages)
	p.ReleaseAll(pages)
	if s := p.Stats(); s.Cached != 2 || s.Used != 0 || s.Free != 6 {
		t.Fatalf("after insert: %+v", s)
	}
	got, matched := p.Match(append(seqTokens(100, 32), 7, 7), 100)
	if matched != 32 || !slices.Equal(got, pages[:2]) {
		t.Fatalf("Match = %v %d, want %v 32", got, matched, pages[:2])
	}
	if s := p.Stats(); s.Used != 2 || s.Cached != 0 {
		t.Fatalf("matched pages are not used: %+v", s)
	}
	p.ReleaseAll(got)
	// A limit inside the second page copies its first slots.
	got, matched = p.Match(tokens, 20)
	if matched != 20 || got[0] != pages[0] || got[1] == pages[1] {
		t.Fatalf("Match(limit 20) = %v %d", got, matched)
	}
	for off := range 4 {
		if v := p.KV.K[0][(got[1]*PageSize+off)*2]; v != float32(PageSize+off) {
			t.Fatalf("copied slot %d holds %v", off, v)
		}
	}
	p.ReleaseAll(got)
	if _, m := p.Match(seqTokens(5, 40), 40); m != 0 {
		t.Fatalf("unrelated tokens matched %d", m)
	}
}

func TestEvictionLRU(t *testing.T) {
	p := NewPool(4, 1, 2, true)
	a, b := seqTokens(0, 32), seqTokens(1000, 32)
	pa, pb := allocN(t, p, 2), allocN(t, p, 2)
	p.Insert(a, pa)
	p.Insert(b, pb)
	p.ReleaseAll(pa)
	p.ReleaseAll(pb)
	if p.Available() != 4 {
		t.Fatalf("Available = %d", p.Available())
	}
	used, _ := p.Match(a, 32) // a is now the most recently used, and held
	pg := allocN(t, p, 2)     // evicts b's leaf, then b's root page
	if _, m := p.Match(b, 32); m != 0 {
		t.Fatalf("b still matches %d tokens", m)
	}
	if _, ok := p.Alloc(); ok {
		t.Fatal("Alloc evicted pages in use")
	}
	p.ReleaseAll(used)
	p.ReleaseAll(pg)
	got, m := p.Match(a, 32)
	if m != 32 {
		t.Fatalf("a lost from the cache: %d", m)
	}
	p.ReleaseAll(got)
}

// A cached page above a page that is in use cannot be evicted (eviction
// takes leaves), so Available does not count it: two sequences computed
// the same first page, the tree kept the first one's, and the second's
// next page sits under it while that sequence runs.
func TestAvailableCountsOnlyEvictablePages(t *testing.T) {
	p := NewPool(4, 1, 2, true)
	tokens := seqTokens(0, 32)
	first := allocN(t, p, 1)
	p.Insert(tokens[:PageSize], first)
	p.ReleaseAll(first) // cached, unreferenced
	second := allocN(t, p, 2)
	p.Insert(tokens, second) // its second page goes under the first's
	if got := p.Available(); got != 1 {
		t.Fatalf("Available = %d with one free page and a cached page above a used one; want 1", got)
	}
	one := allocN(t, p, 1)
	if _, ok := p.Alloc(); ok {
		t.Fatal("Alloc evicted a page with a used page under it")
	}
	p.ReleaseAll(second)
	if got := p.Available(); got != 3 {
		t.Fatalf("Available = %d once the second sequence ended; want 3", got)
	}
	p.ReleaseAll(one)
}

// bruteIdle is radix.idle by a walk of the tree, as the definition says.
func bruteIdle(r *radix, n *node, refs []int32) (count int, held bool) {
	for e, c := range r.edges {
		if e.parent != n {
			continue
		}
		k, h := bruteIdle(r, c, refs)
		count += k
		if h || refs[c.page] != 0 {
			held = true
		} else {
			count++
		}
	}
	return count, held
}

// bruteVictim is the page eviction must take: the least recently used
// unreferenced leaf, the lowest page on a tie.
func bruteVictim(r *radix, refs []int32) (int, bool) {
	var victim *node
	for page, n := range r.byPage {
		if refs[page] != 0 || n.kids != 0 {
			continue
		}
		if victim == nil || n.lastUse < victim.lastUse || n.lastUse == victim.lastUse && n.page < victim.page {
			victim = n
		}
	}
	if victim == nil {
		return 0, false
	}
	return victim.page, true
}

// TestCountsFollowTheTree drives a small pool with sequences that share
// prefixes, start, grow and end in a random order, and after every step
// holds what the pool keeps up to date (the evictable pages, the page
// counts, the eviction victim) to the definitions computed from scratch.
func TestCountsFollowTheTree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := NewPool(48, 1, 1, true)
	type seq struct {
		tokens []int
		pages  []int
	}
	var live []*seq
	evictions := 0
	check := func(when string) {
		t.Helper()
		idle, _ := bruteIdle(p.radix, p.radix.root, p.refs)
		if got := p.radix.idle(); got != idle {
			t.Fatalf("%s: idle %d, the tree says %d", when, got, idle)
		}
		want := Stats{Free: len(p.free), Total: p.Pages()}
		for page, n := range p.refs {
			switch {
			case n > 0:
				want.Used++
			case p.cached(page):
				want.Cached++
			}
		}
		if got := p.Stats(); got != want {
			t.Fatalf("%s: stats %+v, counted %+v", when, got, want)
		}
	}
	for step := range 4000 {
		switch op := r.IntN(3); {
		case op < 2 && len(live) < 6: // start a sequence from a shared stem
			stem := r.IntN(3)
			n := PageSize * (1 + r.IntN(5))
			tokens := make([]int, n)
			for i := range tokens {
				tokens[i] = stem*1000 + i
				if i >= PageSize*r.IntN(4) && r.IntN(4) == 0 {
					tokens[i] += 100 + r.IntN(3)
				}
			}
			pages, _ := p.Match(tokens, n)
			s := &seq{tokens: tokens, pages: pages}
			for len(s.pages)*PageSize < n {
				victim, evicts := bruteVictim(p.radix, p.refs)
				if len(p.free) > 0 {
					evicts = false
				}
				page, ok := p.Alloc()
				if !ok {
					break
				}
				if evicts {
					evictions++
				}
				if evicts && (page != victim || p.cached(victim)) {
					t.Fatalf("step %d: evicted page %d, the least recently used leaf is %d", step, page, victim)
				}
				s.pages = append(s.pages, page)
			}
			p.Insert(tokens[:len(s.pages)*PageSize], s.pages)
			live = append(live, s)
		case len(live) > 0: // end one
			i := r.IntN(len(live))
			p.ReleaseAll(live[i].pages)
			live = slices.Delete(live, i, i+1)
		}
		check(fmt.Sprintf("step %d", step))
	}
	for _, s := range live {
		p.ReleaseAll(s.pages)
	}
	check("the end")
	if evictions < 100 {
		t.Fatalf("only %d allocations evicted a page: the test did not fill the pool", evictions)
	}
	if s := p.Stats(); s.Used != 0 || s.Cached+s.Free != s.Total {
		t.Fatalf("pages left in use: %+v", s)
	}
}
