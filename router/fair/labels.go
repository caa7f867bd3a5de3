package fair

import (
	"container/heap"
	"slices"
	"sync"
)

// Other is the label of the tenants that are not among the top ones.
const Other = "other"

// Labels names tenants in metrics with a bounded number of label values:
// the top tenants by recent traffic keep their name, the rest are Other.
//
// It counts traffic with the space-saving algorithm (Metwally, Agrawal and
// El Abbadi 2005) over 4N counters (at least 16), whose counts halve every
// 1024 updates per counter so that they follow recent traffic. A tenant
// is named while fewer than N are, if its traffic stands out of the
// sketch's noise (its count, less its error bound, over the least count);
// a tenant beyond that takes the place of the named
// tenant of least traffic once its own count, less the sketch's error
// bound, is twice that one's: labels do not flap between two tenants of
// about the same traffic, and a tenant that loses its name is reported to
// OnEvict, which deletes its series. A tenant named like Other is counted
// with the others. Its methods are safe for concurrent
// use.
type Labels struct {
	mu      sync.Mutex
	n       int
	onEvict func(name string)
	entries map[string]*labelEntry
	all     labelHeap // tracked tenants, least count first
	named   labelHeap // named tenants, least count first
	updates int
}

type labelEntry struct {
	name     string
	count    int64
	err      int64 // over-estimate inherited from the entry it replaced
	idx      int   // in all
	namedIdx int   // in named, -1 when not named
}

// NewLabels returns a Labels that names at most n tenants. onEvict, when
// not nil, is called (with Labels' lock held: it must not call back) with
// each name that stops being a label.
func NewLabels(n int, onEvict func(name string)) *Labels {
	return &Labels{n: max(n, 0), onEvict: onEvict, entries: map[string]*labelEntry{}, named: labelHeap{named: true}}
}

func (l *Labels) capacity() int { return max(4*l.n, 16) }

// Label records weight (requests or tokens; less than 1 counts as 1) of
// traffic for tenant and returns the label to use for it: its name or
// Other.
func (l *Labels) Label(tenant string, weight int64) string {
	weight = max(weight, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[tenant]
	switch {
	case e != nil:
		e.count += weight
		heap.Fix(&l.all, e.idx)
	case l.all.Len() < l.capacity():
		e = &labelEntry{name: tenant, count: weight, namedIdx: -1}
		l.entries[tenant] = e
		heap.Push(&l.all, e)
	default:
		// Space-saving: the new tenant takes the least counter over,
		// with its count as the error bound.
		e = l.all.items[0]
		l.unname(e)
		delete(l.entries, e.name)
		e.name = tenant
		e.err = e.count
		e.count += weight
		l.entries[tenant] = e
		heap.Fix(&l.all, e.idx)
	}
	if e.namedIdx >= 0 {
		heap.Fix(&l.named, e.namedIdx)
	}
	l.decay()
	if e.namedIdx >= 0 {
		return tenant
	}
	// A free name goes to a tenant whose traffic stands out of the
	// sketch's noise: not one that merely took a counter over.
	if l.named.Len() < l.n {
		if e.err == 0 || e.count-e.err > l.all.items[0].count {
			l.name(e)
			return tenant
		}
		return Other
	}
	if l.n > 0 && e.count-e.err > 2*l.named.items[0].count {
		l.unname(l.named.items[0])
		l.name(e)
		return tenant
	}
	return Other
}

// Named returns the tenants that are labels, sorted.
func (l *Labels) Named() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, l.named.Len())
	for _, e := range l.named.items {
		out = append(out, e.name)
	}
	slices.Sort(out)
	return out
}

func (l *Labels) name(e *labelEntry) {
	heap.Push(&l.named, e)
}

func (l *Labels) unname(e *labelEntry) {
	if e.namedIdx < 0 {
		return
	}
	heap.Remove(&l.named, e.namedIdx)
	if l.onEvict != nil {
		l.onEvict(e.name)
	}
}

// decay halves every count once per 1024 updates per counter. Halving
// keeps both heaps' order.
func (l *Labels) decay() {
	l.updates++
	if l.updates < 1024*l.capacity() {
		return
	}
	l.updates = 0
	for _, e := range l.all.items {
		e.count /= 2
		e.err /= 2
	}
}

// labelHeap is a min-heap of entries by count; named says which of an
// entry's indexes it keeps.
type labelHeap struct {
	items []*labelEntry
	named bool
}

func (h *labelHeap) setIdx(i int) {
	if h.named {
		h.items[i].namedIdx = i
	} else {
		h.items[i].idx = i
	}
}

func (h *labelHeap) Len() int           { return len(h.items) }
func (h *labelHeap) Less(i, j int) bool { return h.items[i].count < h.items[j].count }
func (h *labelHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.setIdx(i)
	h.setIdx(j)
}
func (h *labelHeap) Push(x any) {
	h.items = append(h.items, x.(*labelEntry))
	h.setIdx(len(h.items) - 1)
}
func (h *labelHeap) Pop() any {
	e := h.items[len(h.items)-1]
	h.items[len(h.items)-1] = nil
	h.items = h.items[:len(h.items)-1]
	if h.named {
		e.namedIdx = -1
	}
	return e
}
