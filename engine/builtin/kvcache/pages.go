package kvcache

import (
	"github.com/caddy-mlc/caddy-mlc/engine/builtin/model"
)

// PageSize is the number of token slots of a page.
const PageSize = 16

// Pool is the KV memory and its page allocator.
type Pool struct {
	// KV is the slot-addressed memory the model reads and writes.
	KV model.KV
	// Chain is a timed engine's stand-in for KV (NewChainPool): one word
	// a slot, the hash of the context up to that slot's position.
	Chain []uint64
	dim   int
	refs  []int32 // holders of each page other than the prefix cache
	used  int     // pages with a holder
	free  []int   // free pages, a stack
	radix *radix  // nil when prefix caching is off
}

// Stats counts the pages of a pool. Pages held only by the prefix cache
// are Cached, not Used.
type Stats struct {
	Used, Cached, Free, Total int
}

// NewPool returns a pool of pages pages for a model with the given layers
// and width, with a radix prefix cache when prefixCache is set.
func NewPool(pages, layers, dim int, prefixCache bool) *Pool {
	p := &Pool{dim: dim, refs: make([]int32, pages), free: make([]int, pages)}
	p.KV = model.KV{K: make([][]float32, layers), V: make([][]float32, layers)}
	for l := range layers {
		p.KV.K[l] = make([]float32, pages*PageSize*dim)
		p.KV.V[l] = make([]float32, pages*PageSize*dim)
	}
	for i := range p.free {
		p.free[i] = pages - 1 - i
	}
	if prefixCache {
		p.radix = newRadix()
	}
	return p
}

// NewChainPool returns a pool of pages pages whose slots hold one word
// each (Chain) instead of keys and values: a timed engine's, whose pages
// are bookkeeping and whose "KV" is a hash a slot.
func NewChainPool(pages int, prefixCache bool) *Pool {
	p := NewPool(pages, 0, 0, prefixCache)
	p.Chain = make([]uint64, pages*PageSize)
	return p
}

// Pages is the number of pages of the pool.
func (p *Pool) Pages() int { return len(p.refs) }

// Dim is the width of one slot's key (or value) in one layer.
func (p *Pool) Dim() int { return p.dim }

// Alloc returns a page with one reference, evicting the least recently used
// unreferenced cached page when no page is free. It reports false when
// every page is referenced.
func (p *Pool) Alloc() (int, bool) {
	if len(p.free) == 0 && !p.evictOne() {
		return 0, false
	}
	page := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.refs[page] = 1
	p.used++
	return page, true
}

// Available is the number of pages Alloc can still hand out.
func (p *Pool) Available() int {
	n := len(p.free)
	if p.radix != nil {
		n += p.radix.idle()
	}
	return n
}

// Retain adds a reference to page.
func (p *Pool) Retain(page int) {
	p.refs[page]++
	if p.refs[page] != 1 {
		return
	}
	p.used++
	if p.cached(page) {
		p.radix.retained(page)
	}
}

// Release drops a reference to page; a page nobody holds and the prefix
// cache does not keep becomes free.
func (p *Pool) Release(page int) {
	p.refs[page]--
	switch {
	case p.refs[page] < 0:
		panic("kvcache: page released more often than retained")
	case p.refs[page] > 0:
		return
	}
	p.used--
	if p.cached(page) {
		p.radix.released(page)
	} else {
		p.free = append(p.free, page)
	}
}

// ReleaseAll releases every page of pages.
func (p *Pool) ReleaseAll(pages []int) {
	for _, pg := range pages {
		p.Release(pg)
	}
}

func (p *Pool) cached(page int) bool { return p.radix != nil && p.radix.holds(page) }

// evictOne frees one cached page, reporting false when none can go.
func (p *Pool) evictOne() bool {
	if p.radix == nil {
		return false
	}
	page, ok := p.radix.evict()
	if ok {
		p.free = append(p.free, page)
	}
	return ok
}

// Stats counts the pool's pages.
func (p *Pool) Stats() Stats {
	s := Stats{Used: p.used, Free: len(p.free), Total: len(p.refs)}
	if p.radix != nil {
		s.Cached = len(p.radix.byPage) - p.radix.held
	}
	return s
}

// CopySlots copies the keys and values of n slots from slot src to slot dst
// in every layer.
func (p *Pool) CopySlots(dst, src, n int) {
	if p.Chain != nil {
		copy(p.Chain[dst:dst+n], p.Chain[src:src+n])
	}
	d := p.dim
	for l := range p.KV.K {
		copy(p.KV.K[l][dst*d:(dst+n)*d], p.KV.K[l][src*d:(src+n)*d])
		copy(p.KV.V[l][dst*d:(dst+n)*d], p.KV.V[l][src*d:(src+n)*d])
	}
}
