package fair

import (
	"container/heap"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"
)

// Defaults of a Config's zero values.
const (
	// DefaultTimeout is how long a request waits for capacity.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxWaiting bounds the requests waiting at once.
	DefaultMaxWaiting = 1024
)

// Config is what a configuration sets; Update changes it in place.
type Config struct {
	// MaxWaiting bounds the requests waiting at once; 0 is
	// DefaultMaxWaiting, negative is no bound.
	MaxWaiting int
	// Timeout is how long a request waits for capacity unless its Item
	// says otherwise; 0 is DefaultTimeout, negative is no limit.
	Timeout time.Duration
	// Weights are tenants' shares of a band's tokens; a tenant of weight
	// 2 is served twice the tokens of one of weight 1 while both wait.
	Weights map[string]float64
	// DefaultWeight is the weight of the tenants not in Weights; 0 is 1.
	DefaultWeight float64
}

// Validate reports a weight that is not a positive finite number.
func (c Config) Validate() error {
	ok := func(w float64) bool { return w > 0 && !math.IsInf(w, 0) && !math.IsNaN(w) }
	if c.DefaultWeight != 0 && !ok(c.DefaultWeight) {
		return fmt.Errorf("default weight %v: must be a positive number", c.DefaultWeight)
	}
	for t, w := range c.Weights {
		if !ok(w) {
			return fmt.Errorf("weight of tenant %q: %v: must be a positive number", t, w)
		}
	}
	return nil
}

// Limits bound what is granted and not finished: the capacity of the
// engines behind the queue. A negative bound is none; a zero bound holds
// every request.
type Limits struct {
	// Requests bounds the requests granted and not finished.
	Requests int
	// Tokens bounds the summed cost of the requests granted and not
	// finished; a request that costs more than Tokens is granted when
	// nothing else is in flight.
	Tokens int64
	// Borrow is how many requests may be granted beyond Requests, each
	// to a waiter whose tenant has none in flight in its band. Several
	// replicas that share engines each hold a part of their batch; a
	// light tenant that arrives at one of them then waits for a slot of
	// the engines (which queue at most Borrow more per replica), not for
	// one of its replica's own.
	Borrow int
}

// Unlimited grants every request at once: the queue only counts.
var Unlimited = Limits{Requests: -1, Tokens: -1}

// Item is a request as the queue sees it.
type Item struct {
	// Tenant is who the request is for.
	Tenant string
	// Band is its priority: every waiter of a higher band is granted
	// before any of a lower one.
	Band int
	// Cost is its tokens: the prompt to prefill and the tokens it may
	// generate. Less than 1 counts as 1.
	Cost int64
	// Timeout overrides the queue's for this request when not zero;
	// negative is no limit.
	Timeout time.Duration
}

// Queue is a fair queue of requests waiting for capacity. Its methods are
// safe for concurrent use.
type Queue struct {
	mu            sync.Mutex
	cfg           Config
	limits        Limits
	bands         map[int]*band
	active        []*band // bands with waiters, highest first
	seq           uint64
	waiting       int
	waitingTokens int64
	inFlight      int
	inFlightToks  int64
	closed        bool
	counts        Counters
	now           func() time.Time
	onGrant       func(*Ticket) // tests' record of the order of grants
}

// New returns an empty queue of unlimited capacity (Unlimited) until
// SetLimits.
func New(cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{cfg: cloneConfig(cfg), limits: Unlimited, bands: map[int]*band{}, now: time.Now}, nil
}

func cloneConfig(c Config) Config {
	c.Weights = maps.Clone(c.Weights)
	return c
}

// Update applies a new configuration. Waiting requests keep their place
// and tags; new weights apply to tags given from now on, a new timeout to
// requests submitted from now on, and a smaller size refuses arrivals
// until the queue is under it.
func (q *Queue) Update(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cfg = cloneConfig(cfg)
	return nil
}

// SetLimits sets the capacity, and grants what it allows.
func (q *Queue) SetLimits(l Limits) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = l
	q.dispatch()
}

// Release grants up to n waiters, in the queue's order, whatever the
// Limits: for a router that knows of room the limits do not show. It
// returns how many it granted. They count as in flight until finished.
func (q *Queue) Release(n int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	granted := 0
	for ; granted < n && len(q.active) > 0; granted++ {
		q.grantNext()
		q.counts.Released++
	}
	return granted
}

// Close refuses every waiter and every later Submit with ErrClosed.
// Requests in flight are still finished with Finish.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for len(q.active) > 0 {
		t := q.active[0].byStart.flows[0].head
		q.drop(t, ErrClosed)
		q.counts.Closed++
	}
}

func (q *Queue) weight(tenant string) float64 {
	if w, ok := q.cfg.Weights[tenant]; ok {
		return w
	}
	if q.cfg.DefaultWeight > 0 {
		return q.cfg.DefaultWeight
	}
	return 1
}

func (q *Queue) maxWaiting() int {
	switch {
	case q.cfg.MaxWaiting == 0:
		return DefaultMaxWaiting
	case q.cfg.MaxWaiting < 0:
		return math.MaxInt
	}
	return q.cfg.MaxWaiting
}

func (q *Queue) timeout(it Item) time.Duration {
	d := it.Timeout
	if d == 0 {
		d = q.cfg.Timeout
	}
	if d == 0 {
		d = DefaultTimeout
	}
	return d
}

// Submit enqueues a request and returns its ticket, granted already or
// waiting (Ticket.Wait). It fails at once with ErrClosed, or with a
// *FullError when the queue has no room for it.
func (q *Queue) Submit(it Item) (*Ticket, error) {
	it.Cost = max(it.Cost, 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	q.seq++
	t := &Ticket{q: q, item: it, seq: q.seq, ready: make(chan struct{}), enqueued: q.now()}
	if d := q.timeout(it); d > 0 {
		t.deadline = t.enqueued.Add(d)
	}
	q.counts.Submitted++
	q.push(q.flowFor(it.Band, it.Tenant), t)
	q.dispatch()
	if t.state == stateGranted {
		t.granted = t.enqueued
		q.counts.Immediate++
		return t, nil
	}
	if q.waiting <= q.maxWaiting() {
		return t, nil
	}
	victim := q.victim(t)
	full := &FullError{Size: q.maxWaiting(), PushedOut: victim != t}
	q.drop(victim, full)
	if victim == t {
		q.counts.Rejected++
		return nil, full
	}
	q.counts.PushedOut++
	// The victim may have been the head that did not fit.
	q.dispatch()
	return t, nil
}

// victim is the waiter that gives up its place when t arrives in a full
// queue: the newest of the tenant with the most waiters in the lowest
// band, when that band is lower than t's or that tenant has more waiters
// than t's; otherwise t itself.
func (q *Queue) victim(t *Ticket) *Ticket {
	low := q.active[len(q.active)-1]
	f := low.byLen.flows[0]
	if low.level < t.item.Band || (f != t.flow && f.waiting > t.flow.waiting) {
		return f.tail
	}
	return t
}

// fits reports whether the limits allow granting a request of cost to
// flow f.
func (q *Queue) fits(f *flow, cost int64) bool {
	l := q.limits
	if l.Requests >= 0 && q.inFlight >= l.Requests && (f.inFlight > 0 || q.inFlight >= l.Requests+l.Borrow) {
		return false
	}
	if l.Tokens >= 0 {
		if l.Tokens == 0 || (q.inFlight > 0 && q.inFlightToks+cost > l.Tokens) {
			return false
		}
	}
	return true
}

// dispatch grants waiters in order while the limits allow. The head of
// the highest band that does not fit holds everything behind it: a large
// request is not overtaken forever by small ones, nor a band by a lower
// one.
func (q *Queue) dispatch() {
	for len(q.active) > 0 {
		f := q.active[0].byStart.flows[0]
		if !q.fits(f, f.head.item.Cost) {
			return
		}
		q.grantNext()
		q.counts.Granted++
	}
}

// grantNext grants the head of least start tag of the highest band.
func (q *Queue) grantNext() {
	b := q.active[0]
	f := b.byStart.flows[0]
	t := f.head
	q.unlink(t)
	b.vtime = max(b.vtime, t.start)
	t.state = stateGranted
	t.granted = q.now()
	q.inFlight++
	q.inFlightToks += t.item.Cost
	f.inFlight++
	f.inFlightTokens += t.item.Cost
	b.inFlight++
	close(t.ready)
	if q.onGrant != nil {
		q.onGrant(t)
	}
}

// drop takes the waiting t out of the queue with err.
func (q *Queue) drop(t *Ticket, err error) {
	untag(t)
	f := t.flow
	q.unlink(t)
	t.state = stateDone
	t.err = err
	close(t.ready)
	q.forget(f)
}

// Finish returns the capacity of a granted ticket, and corrects its
// tenant's share with what the request really cost in tokens (prompt and
// generated; negative when unknown: the estimate stands). A ticket
// finished twice, or never granted, is ignored.
func (q *Queue) Finish(t *Ticket, realCost int64) {
	if t == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state != stateGranted {
		return
	}
	q.finish(t, realCost)
	q.counts.Finished++
	q.dispatch()
}

func (q *Queue) finish(t *Ticket, realCost int64) {
	t.state = stateDone
	f := t.flow
	b := f.band
	q.inFlight--
	q.inFlightToks -= t.item.Cost
	f.inFlight--
	f.inFlightTokens -= t.item.Cost
	b.inFlight--
	if realCost >= 0 && realCost != t.item.Cost {
		q.correct(f, float64(realCost-t.item.Cost)/q.weight(f.tenant))
	}
	q.forget(f)
}

// correct moves f's finish tag by delta, and its waiting head's tags with
// it: the tenant's share is charged what its request really cost.
func (q *Queue) correct(f *flow, delta float64) {
	h := f.head
	if h == nil {
		f.finish += delta
		return
	}
	f.finish = h.prevFinish + delta
	q.tag(f, h)
	heap.Fix(&f.band.byStart, f.startIdx)
}

// Destruct closes the queue; with it a Queue is a caddy.Destructor, kept
// in a caddy.UsagePool across reloads by the configs that use it.
func (q *Queue) Destruct() error {
	q.Close()
	return nil
}
