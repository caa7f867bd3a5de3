package caddymlc

import (
	"container/list"
	"sync"
)

// The prefix index: what the prefix_aware policy expects each engine to
// hold in its prefix cache. Like SGLang's cache-aware router it keeps an
// approximate tree of the prompts recently routed to each engine, here as
// the chained hashes of their KV pages: the hash of page k covers the
// whole prefix up to the end of page k, so a set of hashes is a radix
// tree whose nodes are pages, and a lookup walks a prompt's chain until
// the first page the engine does not hold. It forgets the least recently
// used pages beyond the engine's own KV capacity (which it reports), as
// the engine's radix cache does, and every prep_recv answer, which says
// how much the engine really matched, corrects it.

// defaultPrefixPages bounds an index whose engine reports no capacity.
const defaultPrefixPages = 1 << 14

// prefixChain returns the hashes of the prompt's full KV pages: chain[k]
// identifies tokens [0, (k+1)*kvPageTokens).
func prefixChain(prompt []int) []uint64 {
	const offset, prime = 14695981039346656037, 1099511628211 // FNV-1a
	chain := make([]uint64, 0, len(prompt)/kvPageTokens)
	h := uint64(offset)
	for i, id := range prompt {
		for v := uint32(id); ; v >>= 8 {
			h = (h ^ uint64(v&0xff)) * prime
			if v < 0x100 {
				break
			}
		}
		h = (h ^ 0xff) * prime // token separator
		if (i+1)%kvPageTokens == 0 {
			chain = append(chain, h)
		}
	}
	return chain
}

// prefixIndex is one engine's expected prefix cache.
type prefixIndex struct {
	mu    sync.Mutex
	lru   list.List // of uint64 page hashes, most recent first
	pages map[uint64]*list.Element
}

// match returns how many prompt tokens of chain the engine is expected to
// hold.
func (p *prefixIndex) match(chain []uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range chain {
		if _, ok := p.pages[h]; !ok {
			break
		}
		n++
	}
	return n * kvPageTokens
}

// learn records that the engine matched the first matched tokens of a
// prompt (prep_recv's prefix_matched_length; pass -1 when unknown) and
// will hold all of chain once it has prefilled it. Pages it was expected
// to hold beyond matched were evicted: they are forgotten before the
// whole chain is recorded again as the most recent. capacity bounds the
// pages kept (0: the default).
func (p *prefixIndex) learn(chain []uint64, matched, capacity int) {
	if capacity <= 0 {
		capacity = defaultPrefixPages
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pages == nil {
		p.pages = map[uint64]*list.Element{}
	}
	if matched >= 0 {
		for _, h := range chain[min(matched/kvPageTokens, len(chain)):] {
			if e, ok := p.pages[h]; ok {
				p.lru.Remove(e)
				delete(p.pages, h)
			}
		}
	}
	// Last page first, so that a prompt's leading pages are the most
	// recent: like a radix cache, the index forgets leaves before the
	// pages they hang from.
	for i := len(chain) - 1; i >= 0; i-- {
		h := chain[i]
		if e, ok := p.pages[h]; ok {
			p.lru.MoveToFront(e)
			continue
		}
		p.pages[h] = p.lru.PushFront(h)
	}
	for p.lru.Len() > capacity {
		e := p.lru.Back()
		delete(p.pages, e.Value.(uint64))
		p.lru.Remove(e)
	}
}
