package fair

import (
	"container/heap"
	"sort"
)

// flow is one tenant's requests in one band: those waiting, in FIFO order
// (a doubly linked list through the tickets), and the count of those
// granted and not finished.
type flow struct {
	tenant string
	band   *band
	// finish is the finish tag of the tenant's latest tagged request:
	// the head when one waits.
	finish float64

	head, tail     *Ticket
	waiting        int
	waitingTokens  int64
	inFlight       int
	inFlightTokens int64

	startIdx int // in band.byStart, -1 when nothing waits
	lenIdx   int // in band.byLen, -1 when nothing waits
}

// band is one priority level.
type band struct {
	level int
	// vtime is the band's virtual time: the start tag of its latest
	// grant. Every tag of a waiting head is at least vtime.
	vtime    float64
	flows    map[string]*flow
	byStart  startHeap // flows with waiters, least head start tag first
	byLen    lenHeap   // flows with waiters, most waiters first
	waiting  int
	inFlight int
}

// startHeap orders flows by their head's start tag, then arrival.
type startHeap []*flow

func (h startHeap) Len() int { return len(h) }
func (h startHeap) Less(i, j int) bool {
	a, b := h[i].head, h[j].head
	if a.start != b.start {
		return a.start < b.start
	}
	return a.seq < b.seq
}
func (h startHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].startIdx = i
	h[j].startIdx = j
}
func (h *startHeap) Push(x any) {
	f := x.(*flow)
	f.startIdx = len(*h)
	*h = append(*h, f)
}
func (h *startHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.startIdx = -1
	return f
}

// lenHeap orders flows by their number of waiters, most first, then by
// their newest waiter, newest first: the flow that gives up a place when
// the queue is full.
type lenHeap []*flow

func (h lenHeap) Len() int { return len(h) }
func (h lenHeap) Less(i, j int) bool {
	if h[i].waiting != h[j].waiting {
		return h[i].waiting > h[j].waiting
	}
	return h[i].tail.seq > h[j].tail.seq
}
func (h lenHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].lenIdx = i
	h[j].lenIdx = j
}
func (h *lenHeap) Push(x any) {
	f := x.(*flow)
	f.lenIdx = len(*h)
	*h = append(*h, f)
}
func (h *lenHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.lenIdx = -1
	return f
}

// flowFor returns the flow of tenant in band level, made if need be.
func (q *Queue) flowFor(level int, tenant string) *flow {
	b := q.bands[level]
	if b == nil {
		b = &band{level: level, flows: map[string]*flow{}}
		q.bands[level] = b
	}
	f := b.flows[tenant]
	if f == nil {
		f = &flow{tenant: tenant, band: b, finish: b.vtime, startIdx: -1, lenIdx: -1}
		b.flows[tenant] = f
	}
	return f
}

// tag gives t, the new head of f, its start and finish tags.
func (q *Queue) tag(f *flow, t *Ticket) {
	t.prevFinish = f.finish
	t.start = max(f.band.vtime, f.finish)
	t.finish = t.start + float64(t.item.Cost)/q.weight(f.tenant)
	f.finish = t.finish
}

// push appends t to f's waiters.
func (q *Queue) push(f *flow, t *Ticket) {
	b := f.band
	t.flow = f
	t.prev = f.tail
	if f.tail != nil {
		f.tail.next = t
	}
	f.tail = t
	f.waiting++
	f.waitingTokens += t.item.Cost
	if f.head == nil {
		f.head = t
		q.tag(f, t)
		heap.Push(&b.byStart, f)
		heap.Push(&b.byLen, f)
	} else {
		heap.Fix(&b.byLen, f.lenIdx)
	}
	if b.waiting == 0 {
		q.activate(b)
	}
	b.waiting++
	q.waiting++
	q.waitingTokens += t.item.Cost
}

// unlink takes the waiting t out of its flow, the head or not. A head's
// tag is given back so that its successor starts where it would have.
func (q *Queue) unlink(t *Ticket) {
	f := t.flow
	b := f.band
	wasHead := t == f.head
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		f.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		f.tail = t.prev
	}
	t.prev, t.next = nil, nil
	f.waiting--
	f.waitingTokens -= t.item.Cost
	b.waiting--
	q.waiting--
	q.waitingTokens -= t.item.Cost
	if f.head == nil {
		heap.Remove(&b.byStart, f.startIdx)
		heap.Remove(&b.byLen, f.lenIdx)
	} else {
		heap.Fix(&b.byLen, f.lenIdx)
		if wasHead {
			q.tag(f, f.head)
			heap.Fix(&b.byStart, f.startIdx)
		}
	}
	if b.waiting == 0 {
		q.deactivate(b)
	}
}

// untag gives back the tag of t, a waiting head about to leave without
// being served.
func untag(t *Ticket) {
	if t == t.flow.head {
		t.flow.finish = t.prevFinish
	}
}

// activate inserts b into the bands with waiters, highest first.
func (q *Queue) activate(b *band) {
	i := sort.Search(len(q.active), func(i int) bool { return q.active[i].level < b.level })
	q.active = append(q.active, nil)
	copy(q.active[i+1:], q.active[i:])
	q.active[i] = b
}

// deactivate removes b from the bands with waiters.
func (q *Queue) deactivate(b *band) {
	for i, a := range q.active {
		if a == b {
			copy(q.active[i:], q.active[i+1:])
			q.active[len(q.active)-1] = nil
			q.active = q.active[:len(q.active)-1]
			return
		}
	}
}

// forget drops f when it has nothing waiting or in flight: a tenant that
// comes back starts at its band's virtual time, with no credit and no debt
// from before. Keeping the finish tags of idle tenants would hold one
// entry per tenant ever seen while the band is busy, as a stream of new
// tenants, each starting at the virtual time, does not advance it. A band
// with nothing waiting or in flight is dropped whole.
func (q *Queue) forget(f *flow) {
	b := f.band
	if f.waiting > 0 || f.inFlight > 0 {
		return
	}
	delete(b.flows, f.tenant)
	if b.waiting == 0 && b.inFlight == 0 {
		delete(q.bands, b.level)
	}
}
