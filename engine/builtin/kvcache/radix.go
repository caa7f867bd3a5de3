package kvcache

// radix is a prefix tree over token ids at page granularity: each edge is
// one full page of PageSize tokens, and each node keeps the page holding
// the keys and values of those tokens (which depend on the whole path to
// the root).
type radix struct {
	root   *node
	byPage map[int]*node
	clock  uint64
}

type pageKey [PageSize]int32

type node struct {
	key      pageKey
	page     int
	parent   *node
	children map[pageKey]*node
	lastUse  uint64
}

func newRadix() *radix {
	return &radix{root: &node{children: map[pageKey]*node{}}, byPage: map[int]*node{}}
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
		c, ok := n.children[keyOf(tokens[i:])]
		if !ok {
			break
		}
		c.lastUse = r.clock
		path = append(path, c)
		n = c
	}
	return path
}

// insert adds the full pages of tokens, held in pages, to the tree. Pages
// already cached under the same tokens are left to their owner; insert
// reports nothing because the caller releases its references either way.
func (r *radix) insert(tokens []int, pages []int) {
	r.clock++
	n := r.root
	for i := 0; (i+1)*PageSize <= len(tokens) && i < len(pages); i++ {
		k := keyOf(tokens[i*PageSize:])
		c, ok := n.children[k]
		if !ok {
			if r.holds(pages[i]) {
				return // the page already sits elsewhere in the tree
			}
			c = &node{key: k, page: pages[i], parent: n, children: map[pageKey]*node{}}
			n.children[k] = c
			r.byPage[pages[i]] = c
		}
		c.lastUse = r.clock
		n = c
	}
}

// idle counts the cached pages that eviction can free: those nobody
// references and under which no page is referenced. evict takes leaves
// only, so an unreferenced page above a referenced one (two sequences
// computed the same first pages, and the tree kept the other's) stays
// until that one goes.
func (r *radix) idle(refs []int32) int {
	n, _ := idleUnder(r.root, refs)
	return n
}

// idleUnder returns the evictable pages below n and whether a page below n
// is referenced.
func idleUnder(n *node, refs []int32) (count int, held bool) {
	for _, c := range n.children {
		k, h := idleUnder(c, refs)
		count += k
		if h || refs[c.page] != 0 {
			held = true
		} else {
			count++
		}
	}
	return count, held
}

// evict removes the least recently used unreferenced leaf and returns its
// page.
func (r *radix) evict(refs []int32) (int, bool) {
	var victim *node
	for page, n := range r.byPage {
		if refs[page] != 0 || len(n.children) != 0 {
			continue
		}
		if victim == nil || n.lastUse < victim.lastUse || n.lastUse == victim.lastUse && n.page < victim.page {
			victim = n
		}
	}
	if victim == nil {
		return 0, false
	}
	delete(victim.parent.children, victim.key)
	delete(r.byPage, victim.page)
	return victim.page, true
}
