package router

import (
	"cmp"
	"container/list"
	"sync"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// The prefix index: what a router whose policy reads Candidate.PrefixHit
// (prefix_aware) expects each engine to hold in its prefix cache. Like
// SGLang's cache-aware router it keeps an approximate tree of the prompts
// recently routed to each engine, here as the chained hashes of their KV
// pages: the hash of page k covers the whole prefix up to the end of page
// k, so a set of hashes is a radix tree whose nodes are pages, and a
// lookup walks a prompt's chain until the first page the engine does not
// hold. It forgets the least recently
// used pages beyond the engine's own KV capacity (which it reports), as
// the engine's radix cache does, and what the engine says it matched
// (prep_recv's answer, a whole request's final usage) corrects it.
//
// A page is pending from the moment a request carrying it is routed until
// the engine is known to have computed it: until then a request with the
// same prefix finds nothing in the engine's cache, as the prefill is still
// running (engines do not share one in flight). Routing counts pending
// pages, so that requests sharing a prefix keep going to the engine that
// will hold it; only a held page that the engine did not match means the
// engine evicted it.
//
// The index lives with the engine (upstream.prefixes), so that it
// outlives reloads that keep the engine, and is kept only by routers
// whose policy reads it: a router whose policy does not (hashing every
// prompt, a map and a list of pages per engine: a few percent of a
// least_loaded router's CPU, for nothing) keeps none, and does not see
// the prefixes of another router's requests on the same engines.
// prefixTracker writes it, through the Observer hooks, and hands each
// change to the process's PrefixSink, if any, for the other replicas
// (prefixshare.go).

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

// prefixTracker keeps the engines' prefix indexes for a router whose
// policy reads Candidate.PrefixHit: of the engines that generate, and of
// prefill engines, whose remote_send computes the prompt's window (all
// of it but its last token, MLC's default) from their own prefix cache,
// which keeps it; what a prefill engine says it reused (the built-in
// engine's remote_send usage) corrects its index.
type prefixTracker struct{}

// Interface guards.
var (
	_ Observer      = prefixTracker{}
	_ MatchObserver = prefixTracker{}
)

// prefixNote is a route's bookkeeping for the prefix index.
type prefixNote struct {
	// predicted is what the index expected the engine to have computed of
	// the prompt when it was routed (matchHeld): what the engine's final
	// usage corrects.
	predicted int
	// tracked says the index set predicted (Routed).
	tracked bool
	// corrected says the engine already said what it matched
	// (prep_recv): the index took it then.
	corrected bool
}

// indexOf returns the engine's index and the prompt's chain when the
// route's engine is one the index follows.
func indexOf(r *Route) (*prefixIndex, []uint64, int, bool) {
	if r.Request == nil {
		return nil, nil, 0, false
	}
	u := r.Engine.internal()
	return &u.prefixes, windowChain(r.Role, r.Request), u.prefixCapacity(), true
}

// windowChain is the part of req's prefix chain that an engine of role
// computes: a prefill engine the window, the prompt but its last token
// (a page less when the prompt fills its last page); others all of it.
func windowChain(role string, req *Request) []uint64 {
	chain := req.prefixChain()
	if role == engine.RolePrefill {
		chain = chain[:min(len(chain), (len(req.Prompt)-1)/kvPageTokens)]
	}
	return chain
}

// Routed records that the engine will hold the prompt once it has
// prefilled it: its pages count for routing from now on.
func (prefixTracker) Routed(r *Route) {
	p, chain, capacity, ok := indexOf(r)
	if !ok {
		return
	}
	r.prefix.predicted, r.prefix.tracked = p.matchHeld(chain), true
	p.learn(chain, -1, capacity)
	share(r, PrefixRouted, chain, -1, 0)
}

// Matched corrects the index with what the engine says it held
// (prep_recv's prefix_matched_length).
func (prefixTracker) Matched(r *Route, tokens int) {
	p, chain, capacity, ok := indexOf(r)
	if !ok {
		return
	}
	p.learn(chain, tokens, capacity)
	r.prefix.corrected = true
	share(r, PrefixMatched, chain, tokens, 0)
}

// FirstToken does nothing: the engine's usage says more, at the end.
func (prefixTracker) FirstToken(*Route) {}

// Finished reads the engine's final usage: it prefilled the prompt, so
// it holds it now, and how much of it its cache held (the built-in
// engine reports it) corrects the index, unless prep_recv already did.
func (prefixTracker) Finished(r *Route, u *Usage) {
	p, chain, capacity, ok := indexOf(r)
	if !ok || u == nil {
		return
	}
	cached := -1
	if u.CachedTokens >= 0 && !r.prefix.corrected {
		p.correct(r.prefix.predicted, u.CachedTokens, capacity)
		cached = u.CachedTokens
	}
	p.hold(chain)
	share(r, PrefixFinished, chain, cached, r.prefix.predicted)
}

// Failed does nothing: pages routed to the engine stay pending, and the
// least recently used are forgotten first.
func (prefixTracker) Failed(*Route, error) {}

// prefixIndex is one engine's expected prefix cache.
type prefixIndex struct {
	mu    sync.Mutex
	lru   list.List // of *indexedPage, most recent first
	pages map[uint64]*list.Element
	// limit is how many pages the engine's cache is believed to keep: its
	// KV capacity at most, less once the engine turned out to have
	// evicted what the index still held (its running sequences take
	// pages from the cache).
	limit int
}

// indexedPage is a page of the index: its hash, and whether the engine
// is known to have computed it (else it is pending).
type indexedPage struct {
	hash uint64
	held bool
}

// match returns how many prompt tokens of chain the engine is expected to
// hold once the requests routed to it have been prefilled.
func (p *prefixIndex) match(chain []uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.matchLocked(chain, false)
}

// matchHeld returns how many prompt tokens of chain the engine is known
// to have computed and is expected to keep: what it should match now.
func (p *prefixIndex) matchHeld(chain []uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.matchLocked(chain, true)
}

func (p *prefixIndex) matchLocked(chain []uint64, heldOnly bool) int {
	n := 0
	for _, h := range chain {
		e, ok := p.pages[h]
		if !ok || heldOnly && !e.Value.(*indexedPage).held {
			break
		}
		n++
	}
	return n * kvPageTokens
}

// learn records that the engine will hold all of chain once it has
// prefilled it. matched, when known (prep_recv's prefix_matched_length;
// -1 otherwise), is what it held before: pages the index expected beyond
// it were evicted, and the index corrects its idea of how much the engine
// keeps (see correct). capacity is the engine's KV capacity in pages (0
// when unknown).
func (p *prefixIndex) learn(chain []uint64, matched, capacity int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pages == nil {
		p.pages = map[uint64]*list.Element{}
	}
	held := 0 // the pages the engine said it matched
	if matched >= 0 {
		p.correctLocked(p.matchLocked(chain, true), matched, capacity)
		held = min(matched/kvPageTokens, len(chain))
		for _, h := range chain[held:] {
			if e, ok := p.pages[h]; ok && e.Value.(*indexedPage).held {
				p.removeLocked(e)
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
		p.pages[h] = p.lru.PushFront(&indexedPage{hash: h})
	}
	p.holdLocked(chain[:held]) // what it matched it holds, recorded or not before
	p.trimLocked(capacity)
}

// hold records that the engine computed chain: a request that carried it
// finished its prefill there.
func (p *prefixIndex) hold(chain []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdLocked(chain)
}

func (p *prefixIndex) holdLocked(chain []uint64) {
	for _, h := range chain {
		if e, ok := p.pages[h]; ok {
			e.Value.(*indexedPage).held = true
		}
	}
}

// correct tells the index what the engine matched (matched tokens) of a
// prompt of which the index expected predicted tokens (matchHeld), when
// the answer comes after the prompt was recorded (a request's final
// usage).
// Less than expected: the engine keeps fewer pages than the index did, and
// the index keeps fewer. As much: the index's idea grows back towards the
// engine's capacity.
func (p *prefixIndex) correct(predicted, matched, capacity int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.correctLocked(predicted, matched, capacity)
	p.trimLocked(capacity)
}

func (p *prefixIndex) correctLocked(predicted, matched, capacity int) {
	capacity = cmp.Or(capacity, defaultPrefixPages)
	if p.limit == 0 || p.limit > capacity {
		p.limit = capacity
	}
	if matched < predicted {
		p.limit = max(p.limit*7/8, 16)
		return
	}
	p.limit = min(p.limit+max(capacity/64, 1), capacity)
}

func (p *prefixIndex) trimLocked(capacity int) {
	limit := cmp.Or(capacity, defaultPrefixPages)
	if p.limit > 0 {
		limit = min(limit, p.limit)
	}
	for p.lru.Len() > limit {
		p.removeLocked(p.lru.Back())
	}
}

func (p *prefixIndex) removeLocked(e *list.Element) {
	delete(p.pages, e.Value.(*indexedPage).hash)
	p.lru.Remove(e)
}
