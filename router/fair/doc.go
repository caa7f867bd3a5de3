// Package fair holds requests that wait for engine capacity and releases
// them in the order a shared fleet owes its tenants: by priority band
// first, then fairly across tenants by tokens.
//
// A request is an Item: the tenant it is for, its band (an integer, higher
// served first, always) and its cost in tokens (the prompt to prefill plus
// the tokens it may generate, max_tokens until it finishes). Submit admits
// it at once when nothing of its band or higher is waiting and the
// queue's Limits (requests and tokens granted and not yet finished) allow,
// and otherwise holds it; Ticket.Wait blocks until it is granted, its
// context ends or it waited the queue's timeout (a *TimeoutError, which the
// router answers with a 503 and Retry-After). Finish returns its capacity
// with the tokens it really cost. The queue starts no goroutines: grants
// happen on the goroutines of Submit, Finish, SetLimits and Release, so a
// waiter's only goroutine is its caller's.
//
// Within a band, the queue is start-time fair queueing (SFQ, Goyal, Vin
// and Cheng 1996) on tokens. Every waiting request at the head of its
// tenant's FIFO carries a start tag S = max(v, F) and a finish tag
// F' = S + cost/weight, where F is the tenant's previous finish tag and v,
// the band's virtual time, is the start tag of the latest grant; the head
// with the least start tag is granted next. SFQ rather than WFQ's finish
// tags because an engine is a server of varying rate (its speed depends on
// the batch it runs), and SFQ's fairness bound holds for such servers
// without simulating a fluid system; because a quiet tenant's request goes
// next whatever its size, where a finish tag would hold a long prompt of a
// quiet tenant behind a flood of short requests; and because a cost known only at the end (the tokens a request
// really generated) can correct the tenant's finish tag afterwards. Only
// the head of each tenant's FIFO is tagged, so Finish's correction moves
// that one tag, the tenant's order is kept by construction, and every
// operation is O(log n) in the number of tenants waiting (a heap of
// tenants by start tag per band; bands, expected to be few, are a sorted
// list). A tenant with nothing waiting or in flight is forgotten and comes
// back at v: it gets no credit for its idle time, and a tenant that floods
// gets no more than its weight's share of a band, so a tenant with one
// request waiting is served after at most about one request of each other
// tenant of its band.
//
// The queue is bounded: when it is full, an arrival pushes out the newest
// waiter of the tenant with the most waiters in the lowest band waiting
// (a *FullError with PushedOut), if that is a lower band or a tenant with
// more waiters than its own; otherwise the arrival is refused at once. A
// flood fills the queue with its own requests, but it does not shut other
// tenants out of it.
//
// A Queue outlives a configuration: Update changes weights, timeout and
// size in place, SetLimits changes the capacity as engines report it, and
// waiting requests keep their order across both.
package fair
