package kvcache

// Match finds the longest cached prefix of tokens, at most limit tokens
// long, and returns pages holding it, each with a reference for the caller,
// and its length. Whole cached pages are shared; when limit cuts a cached
// page, its first slots are copied into a fresh page the caller owns, so
// the caller may write after the match. Without a prefix cache it returns
// nothing.
func (p *Pool) Match(tokens []int, limit int) (pages []int, matched int) {
	if p.radix == nil || limit <= 0 {
		return nil, 0
	}
	path := p.radix.match(tokens)
	matched = min(len(path)*PageSize, limit)
	full := matched / PageSize
	for _, n := range path[:full] {
		p.Retain(n.page)
		pages = append(pages, n.page)
	}
	if rest := matched % PageSize; rest != 0 {
		src := path[full].page
		p.Retain(src) // keep it while Alloc may evict
		page, ok := p.Alloc()
		p.Release(src)
		if !ok {
			return pages, full * PageSize
		}
		p.CopySlots(page*PageSize, src*PageSize, rest)
		pages = append(pages, page)
	}
	return pages, matched
}

// Insert offers the full pages of a sequence to the prefix cache: tokens
// are the tokens whose keys and values the pages hold, in order. The
// caller keeps its references and releases them as usual.
func (p *Pool) Insert(tokens []int, pages []int) {
	if p.radix != nil {
		p.radix.insert(tokens, pages, p.refs)
	}
}
