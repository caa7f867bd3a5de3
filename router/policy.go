package router

import (
	"time"
)

// Policy is a selection policy: how the router chooses among engines of
// equal standing, as reverse_proxy's Selector is for its upstreams. It
// chooses the decode engine (disagg mode), the prefill engine (disagg
// mode) and the engine of a whole request (whole mode).
//
// In Caddy, policies are modules in the namespace
// http.handlers.mlc_router.selection_policies (see the caddymlc package):
// `policy <name> [args...]` in a Caddyfile loads the module of that name.
// A policy may learn from the requests it routed by being an Observer.
type Policy interface {
	// Choose returns the index in cands of the engine to use for req.
	// cands holds at least one engine, all ready and of the same tier
	// (the router passes only the best tier that has an engine); their
	// order rotates from one choice to the next, so that a policy that
	// keeps the first of equals spreads ties. The router holds its choice
	// lock meanwhile: Choose must be quick and must not block. An index
	// outside cands chooses the first.
	Choose(req *Request, cands []Candidate) int
}

// Request is an attempt of a request, as policies and observers see it.
// The router makes it, so the fields that will come (a tenant, a priority
// band) break no policy; a policy reads it and must not change it.
type Request struct {
	// ID names the attempt: the `user` of its calls to the engines
	// (<request id>-<choice>-<attempt>), unique per attempt, so that a
	// trace can find the engines' log lines.
	ID string
	// Model is the model the request asks for.
	Model string
	// Prompt is the attempt's prompt in token ids: the client's, plus the
	// text already delivered when the attempt resumes an earlier one.
	Prompt []int
	// Tenant is who the request is for ("" for the default tenant), and
	// Band its priority (see Facts).
	Tenant string
	Band   int
	// Targets are its latency targets (see Facts), zero for none.
	Targets Targets
	// Session is the hash of the key of the conversation the request
	// continues (see session.go); 0: none.
	Session uint64

	chain []uint64 // the prompt's prefix chain, made when first needed
}

// prefixChain returns the prompt's prefix chain, hashed once per attempt.
func (q *Request) prefixChain() []uint64 {
	if q.chain == nil {
		q.chain = prefixChain(q.Prompt)
	}
	return q.chain
}

// Engine is an engine as policies know it: comparable, and the same for
// as long as the engine is in its fleet (a reload that keeps the fleet
// keeps it), so a policy may key its own state by it.
type Engine interface {
	// Addr is the engine's host:port.
	Addr() string
	// internal seals the interface: only the router makes engines.
	internal() *Upstream
}

// Tier is how fit an engine is for a call. The router sorts the ready
// engines into tiers, and its policy chooses in the best one that has an
// engine.
type Tier int

// Tiers, best first. Engines whose circuit breaker is open come last, as
// a last resort when nothing else is ready; the router itself chooses
// among those (the fewest failures), not the policy.
const (
	// TierGood: breaker closed, room for the request.
	TierGood Tier = iota
	// TierSaturated: the engine reports work it could not start for want
	// of KV pages, or too few pages for the request: what goes there
	// queues behind held pages.
	TierSaturated
	// TierAvoided: the engine failed an earlier attempt of this request,
	// or preempted the one before (it is short of KV memory).
	TierAvoided
	tierBroken // breaker open
	tierNone
)

// Candidate is an engine that may be chosen, as it stands at the moment
// of the choice: a copy, which the policy may keep.
type Candidate struct {
	Engine Engine
	// Addr is the engine's host:port.
	Addr string
	// Role is what the engine is chosen for: "prefill" (a remote_send: it
	// computes the prompt's KV for another engine), "decode" (it
	// generates, disagg mode; it may prefill the prompt too) or "any"
	// (the whole request, whole mode).
	Role string
	Tier Tier
	// InFlight is the calls this Caddy has in flight on the engine (every
	// router that shares it): a decode engine is held from prep_recv to
	// the end of its stream, a prefill engine for its remote_send.
	InFlight int
	// Prefilling is the part of InFlight that has not had its first token
	// yet: prefill work the engine has still to do.
	Prefilling int
	// Others is the work the engine last reported that is not this
	// Caddy's (other replicas' calls, reservations not yet released), in
	// calls; it fades as the report ages, to nothing at three poll
	// intervals.
	Others float64
	// Load is what the engine last reported of itself; its At is zero
	// when there is no report, or none recent enough to say anything of
	// now.
	Load EngineLoad
	// PrefixHit is how many tokens of the prompt the engine is expected
	// to hold in its prefix cache once the requests sent there are
	// prefilled; -1 when unknown. The router predicts it only for a
	// policy that reads it (see PrefixReader), and not for prefill
	// engines.
	PrefixHit int
	// TTFT is the engine's predicted time to first token for the request
	// (a prefill engine: to the end of its remote_send), TPOT its
	// predicted time per output token with the request in its batch, from
	// its latency model; 0 while the model cannot say (too few recent
	// calls there). The router predicts them only for a policy that reads
	// them (see LatencyReader).
	TTFT, TPOT time.Duration
	// IdleTTFT is the engine's predicted time to first token for the
	// request were it idle: how fast the engine is, whatever its load; 0
	// while its model cannot say.
	IdleTTFT time.Duration
	// SessionHome marks the engine the request's session went to last
	// (see session.go). The router sends the session there itself while
	// that engine is within the balance; a policy sees it marked when it
	// is not, and chooses.
	SessionHome bool
}

// Calls is the engine's work in calls: this Caddy's in flight plus what
// the engine reported of others.
func (c *Candidate) Calls() float64 { return float64(c.InFlight) + c.Others }

// EngineLoad is what an engine reported of its own load (its
// query_engine_metrics, polled every 100 ms, or a request's final usage).
type EngineLoad struct {
	At      time.Time // when the report came; zero: no recent report
	Running int       // sequences prefilling or decoding
	Waiting int       // sequences and prep_recvs queued
	// Blocked is the part of Waiting the engine's last step could not
	// start, short of KV pages (all of it, for an engine that does not
	// say).
	Blocked  int
	Prepared int // reservations (prep_recv) waiting for start_generate
	// KV cache pages: held by sequences, free, and kept by the prefix
	// cache with no sequence using them (room too: the engine evicts
	// them for new work); Total is the engine's capacity.
	PagesUsed, PagesFree, PagesCached, PagesTotal int
}

// PrefixReader is implemented by a policy that reads
// Candidate.PrefixHit. For a router whose policy reads it, the router
// keeps, per engine, an index of the prompts it sent there (hashing every
// prompt, and a map and a list per engine: a few percent of a router's
// CPU, which other policies do not pay).
type PrefixReader interface {
	ReadsPrefixHit() bool
}
