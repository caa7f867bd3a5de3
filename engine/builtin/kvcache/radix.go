package kvcache

import "container/heap"

// radix is a prefix tree over token ids at page granularity: each edge is
// one full page of PageSize tokens, and each node keeps the page holding
// the keys and values of those tokens (which depend on the whole path to
// the root).
//
// What the pool asks of it often (how many pages eviction could free, the
// least recently used of them) is kept up to date as pages are retained
// and released rather than found by a walk of the tree: a node is pinned
// while its page is referenced or a node below it is (pins counts those
// reasons), eviction takes unpinned leaves only, and the unpinned leaves
// wait in a heap by last use. A timed engine's cache holds hundreds of
// thousands of tokens, where a walk a step would cost more than the step.
// The edges of every node are in one map, keyed by the node and the
// page's tokens: a map a node would cost more than the node.
type radix struct {
	root   *node
	edges  map[edge]*node
	byPage map[int]*node
	clock  uint64
	pinned int // nodes with pins > 0
	held   int // nodes whose page is referenced
	leaves leafHeap
}

type pageKey [PageSize]int32

// edge is a node's child by its page's tokens.
type edge struct {
	parent *node
	key    pageKey
}

type node struct {
	key     pageKey
	page    int
	parent  *node
	kids    int // children
	lastUse uint64
	held    bool // the page is referenced
	pins    int  // held, plus the children that are pinned
}

func newRadix() *radix {
	return &radix{root: &node{}, edges: map[edge]*node{}, byPage: map[int]*node{}}
}

// child returns n's child whose page holds tokens[:PageSize].
func (r *radix) child(n *node, tokens []int) (*node, bool) {
	c, ok := r.edges[edge{n, keyOf(tokens)}]
	return c, ok
}

func keyOf(tokens []int) pageKey {
	var k pageKey
	for i, t := range tokens[:PageSize] {
		k[i] = int32(t)
	}
	return k
}

func (r *radix) holds(page int) bool { _, ok := r.byPage[page]; return ok }

// match returns the nodes of the longest cached run of full pages that
// tokens starts with, marking them used.
func (r *radix) match(tokens []int) []*node {
	r.clock++
	var path []*node
	n := r.root
	for i := 0; i+PageSize <= len(tokens); i += PageSize {
		c, ok := r.child(n, tokens[i:])
		if !ok {
			break
		}
		r.touch(c)
		path = append(path, c)
		n = c
	}
	return path
}

// insert adds the full pages of tokens, held in pages, to the tree; refs
// are the pool's references. Pages already cached under the same tokens
// are left to their owner; insert reports nothing because the caller
// releases its references either way.
func (r *radix) insert(tokens []int, pages []int, refs []int32) {
	r.clock++
	n := r.root
	for i := 0; (i+1)*PageSize <= len(tokens) && i < len(pages); i++ {
		k := keyOf(tokens[i*PageSize:])
		c, ok := r.edges[edge{n, k}]
		if !ok {
			if r.holds(pages[i]) {
				return // the page already sits elsewhere in the tree
			}
			c = &node{key: k, page: pages[i], parent: n}
			r.edges[edge{n, k}] = c
			n.kids++
			r.byPage[pages[i]] = c
			if refs[pages[i]] > 0 {
				r.retained(pages[i])
			}
		}
		r.touch(c)
		n = c
	}
}

// touch marks n used now; an unpinned leaf waits for eviction by that
// use.
func (r *radix) touch(n *node) {
	n.lastUse = r.clock
	r.offer(n)
}

// offer queues n for eviction when it is an unpinned leaf. The heap may
// hold an older entry of n: evict skips entries that no longer say how n
// stands.
func (r *radix) offer(n *node) {
	if n.pins != 0 || n.kids != 0 || n == r.root {
		return
	}
	if len(r.leaves) > 2*len(r.byPage)+64 {
		r.rebuildLeaves()
	}
	heap.Push(&r.leaves, leaf{n: n, lastUse: n.lastUse})
}

// rebuildLeaves drops the heap's stale entries.
func (r *radix) rebuildLeaves() {
	r.leaves = r.leaves[:0]
	for _, n := range r.byPage {
		if n.pins == 0 && n.kids == 0 {
			r.leaves = append(r.leaves, leaf{n: n, lastUse: n.lastUse})
		}
	}
	heap.Init(&r.leaves)
}

// retained notes that the cached page's first reference was taken.
func (r *radix) retained(page int) {
	n := r.byPage[page]
	n.held = true
	r.held++
	for ; n != r.root; n = n.parent {
		n.pins++
		if n.pins > 1 {
			return
		}
		r.pinned++
	}
}

// released notes that the cached page's last reference went.
func (r *radix) released(page int) {
	n := r.byPage[page]
	n.held = false
	r.held--
	for ; n != r.root; n = n.parent {
		n.pins--
		if n.pins > 0 {
			return
		}
		r.pinned--
		r.offer(n)
	}
}

// idle counts the cached pages that eviction can free: those nobody
// references and under which no page is referenced. evict takes leaves
// only, so an unreferenced page above a referenced one (two sequences
// computed the same first pages, and the tree kept the other's) stays
// until that one goes.
func (r *radix) idle() int { return len(r.byPage) - r.pinned }

// evict removes the least recently used unpinned leaf and returns its
// page.
func (r *radix) evict() (int, bool) {
	for len(r.leaves) > 0 {
		l := heap.Pop(&r.leaves).(leaf)
		n := l.n
		if r.byPage[n.page] != n || n.pins != 0 || n.kids != 0 || n.lastUse != l.lastUse {
			continue // stale: evicted, pinned, a parent again, or used since
		}
		delete(r.edges, edge{n.parent, n.key})
		n.parent.kids--
		delete(r.byPage, n.page)
		r.offer(n.parent)
		return n.page, true
	}
	return 0, false
}

// leaf is an entry of the eviction heap: a node as it stood when queued.
type leaf struct {
	n       *node
	lastUse uint64
}

// leafHeap orders leaves by last use, then page.
type leafHeap []leaf

func (h leafHeap) Len() int { return len(h) }
func (h leafHeap) Less(i, j int) bool {
	if h[i].lastUse != h[j].lastUse {
		return h[i].lastUse < h[j].lastUse
	}
	return h[i].n.page < h[j].n.page
}
func (h leafHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)   { *h = append(*h, x.(leaf)) }
func (h *leafHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
