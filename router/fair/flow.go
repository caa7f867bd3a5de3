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
	byStart  flowHeap // flows with waiters, least head start tag first
	byLen    flowHeap // flows with waiters, most waiters first
	waiting  int
	inFlight int
}

// flowHeap is a heap of flows in the order of less, each flow's place in
// it kept at *at(f), -1 when it is not in it, so that a flow can be
// fixed or removed where it is.
type flowHeap struct {
	flows []*flow
	less  func(a, b *flow) bool
	at    func(f *flow) *int
}

func (h *flowHeap) Len() int           { return len(h.flows) }
func (h *flowHeap) Less(i, j int) bool { return h.less(h.flows[i], h.flows[j]) }
func (h *flowHeap) Swap(i, j int) {
	h.flows[i], h.flows[j] = h.flows[j], h.flows[i]
	*h.at(h.flows[i]) = i
	*h.at(h.flows[j]) = j
}
func (h *flowHeap) Push(x any) {
	f := x.(*flow)
	*h.at(f) = len(h.flows)
	h.flows = append(h.flows, f)
}
func (h *flowHeap) Pop() any {
	n := len(h.flows) - 1
	f := h.flows[n]
	h.flows[n] = nil
	h.flows = h.flows[:n]
	*h.at(f) = -1
	return f
}

// byStart orders flows by their head's start tag, then arrival.
func byStart(a, b *flow) bool {
	if a.head.start != b.head.start {
		return a.head.start < b.head.start
	}
	return a.head.seq < b.head.seq
}

// byLen orders flows by their number of waiters, most first, then by
// their newest waiter, newest first: the flow that gives up a place when
// the queue is full.
func byLen(a, b *flow) bool {
	if a.waiting != b.waiting {
		return a.waiting > b.waiting
	}
	return a.tail.seq > b.tail.seq
}

// flowFor returns the flow of tenant in band level, made if need be.
func (q *Queue) flowFor(level int, tenant string) *flow {
	b := q.bands[level]
	if b == nil {
		b = &band{level: level, flows: map[string]*flow{},
			byStart: flowHeap{less: byStart, at: func(f *flow) *int { return &f.startIdx }},
			byLen:   flowHeap{less: byLen, at: func(f *flow) *int { return &f.lenIdx }}}
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
