// Package budget keeps per-tenant budgets of tokens and requests per
// minute, and answers as OpenAI does when one is spent: a 429
// rate_limit_exceeded with Retry-After, and on every answer the headers
// x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens and
// x-ratelimit-reset-tokens (and the same for requests).
//
// A request reserves its tokens at admission: the prompt and max_tokens
// (or, without max_tokens, the model's remaining context: the router
// computes it and passes the sum). When it ends, Settle charges what it
// really cost and gives back the rest; a request cut short by its client
// pays for the tokens generated until then, and one that never reached an
// engine is given back whole with Cancel.
//
// Each budget is a token bucket that refills continuously: a budget of L
// per minute holds at most L and refills L/60 each second, so a spent
// budget comes back gradually, not all at once at a window's edge, as
// OpenAI's does ("remaining" and "reset" follow it: reset is the time
// until the bucket is full again, in OpenAI's format, 6m0s, 1s, 20ms). A
// bucket (rather than GCRA's single timestamp, which is the same bucket
// told in time) keeps what was spent in tokens, so that a reload that
// changes a limit keeps the tenant's spending, not its time in debt, and
// so that a refund is a subtraction. The level is integer arithmetic in
// 1/60,000,000 of a token, the microseconds of a minute: a budget of L
// refills exactly L units a microsecond and nothing is lost to rounding.
// A bucket lets a tenant spend at most 2L in any 60 seconds (a full bucket
// and a minute's refill) and L a minute over longer spans. A request that
// needs more than a whole budget waits for a full bucket and takes it
// all; what it really costs beyond is a debt paid off before the next
// request, so no request is refused forever.
//
// Budgets are Rules: a tenant's own name, a pattern where * matches any
// run of characters, or * alone for every tenant that no other rule
// matches. Each tenant that a rule matches has its own bucket unless the
// rule is Shared, when they share one. SetRules applies new rules in place;
// buckets are kept, and spending carries over to a new limit.
//
// Buckets live in a Store. MemoryStore, the default, keeps them in the
// process: exact, and per replica. With N Caddy replicas behind a load
// balancer, each keeps its own buckets, so a tenant may spend up to N
// times a budget across them. A Store shared by the replicas makes the
// budget exact across them: Store.Update is a read-modify-write of one
// tenant's State, which such a store implements with a compare-and-swap
// or a lock (the mlc app's cluster option keeps them in Redis:
// cluster.BudgetStore). The replicas' clocks must agree to well
// under the budgets' resolution, as a bucket is read at the time of the
// replica that reads it (a clock behind the stored state refills nothing,
// never negative). While a shared store fails, a Limiter with a Fallback
// decides on the Fallback's buckets at 1/Replicas of each budget: N
// replicas left alone spend about L together, one that serves a tenant
// alone gives it L/N. Without a shared store, the same L/N configured by
// hand bounds a tenant to L in all.
package budget
