package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// Routing modes.
const (
	// ModeDisagg runs prefill and decode on different engines: prep_recv on
	// the decode engine, remote_send on the prefill engine, start_generate
	// on the decode engine (MLC's "disagg").
	ModeDisagg = "disagg"
	// ModeWhole sends each whole request to one engine, chosen by the
	// selection policy (MLC's "round-robin" mode, which is not the
	// round_robin policy; the adapter accepts MLC's name for it).
	ModeWhole = "whole"
)

// DefaultMaxAttempts is the attempts a request gets by default.
const DefaultMaxAttempts = 16

// Config is what a Router serves and how: one model's routing. The
// adapter (caddymlc) fills it from Caddy's config, defaults applied.
type Config struct {
	// Model is the model's name: what clients send and answers carry.
	Model string
	// Path is what the engines load (and are told in requests), and
	// where the router finds the tokenizer and chat template; default:
	// Model.
	Path string
	// Mode is ModeDisagg or ModeWhole.
	Mode string
	// PDBalanceFactor and MaxPrefillQueue shape disaggregation (see
	// disagg).
	PDBalanceFactor float64
	MaxPrefillQueue int
	// Endpoints are the fleet's engines, in NVSHMEM PE order: the roles
	// the router gives them follow from them.
	Endpoints []engine.Endpoint
	// EngineKind is the program that runs the engines; EngineArgs their
	// extra arguments (the context window may be set there).
	EngineKind engine.Kind
	EngineArgs []string
	// EmbeddingModel is the embedding model the engines load beside the
	// chat model, "" for none; clients reach it at /v1/embeddings by
	// EmbeddingName (listed in /v1/models) or by Model.
	EmbeddingModel    string
	EmbeddingModelLib string
	EmbeddingName     string

	// MaxInflight bounds the requests the router runs at once on each
	// generating engine, holding the rest in its fair queue: 0 is the
	// engine's batch where the router can know it (engine.Driver.Batch; a
	// fleet the router spawns, none external or discovered), negative is
	// no bound (the engines queue what they cannot run).
	MaxInflight int
	// SLOAdmission is what the gate does with a request predicted to
	// miss its time-to-first-token target on every engine (admit.go).
	SLOAdmission SLOAdmission

	// ToolParser names the reader of the model's tool calls
	// (router/toolcall's formats: hermes, llama3_json, mistral,
	// pythonic, mlc); "": the one its chat template teaches, when the
	// router recognises it (tools are refused otherwise).
	ToolParser string
	// RefuseMaxTokens refuses a max_tokens above what the context leaves
	// after the prompt (OpenAI's context_length_exceeded), or above
	// MaxTokensLimit; by default it is capped to them.
	RefuseMaxTokens bool
	// DefaultMaxTokens is the max_tokens of a request that sends none
	// (0: MaxTokensLimit, else the rest of the context, as MLC's engines
	// generate); MaxTokensLimit bounds every request, whatever it asks
	// (0: the context).
	DefaultMaxTokens int
	MaxTokensLimit   int

	// CachedTokenWeight is what a prompt token the engines reused from
	// their prefix caches costs a budget, against 1 for one computed (nil:
	// 1, the same).
	CachedTokenWeight *float64

	MaxAttempts   int
	MaxBodySize   int64
	EngineTimeout time.Duration
	QueueTimeout  time.Duration
	QueueSize     int
	BodyTimeout   time.Duration
	ClientTimeout time.Duration

	// PrefillRate is the prefill speed, in prompt tokens a second,
	// assumed of an engine whose latency model cannot say (0:
	// DefaultPrefillRate); MaxPrefillTime bounds the time allowed a
	// prompt's prefill (0: DefaultMaxPrefillTime). See prefill.go.
	PrefillRate    float64
	MaxPrefillTime time.Duration
	// RequestTimeout bounds a request's whole time, all attempts and
	// waits included (0: none): a 504 in the API's shape.
	RequestTimeout time.Duration
	// KeepAlive is how often a stream that waits for text tells its
	// client so (0: never; see keepalive.go).
	KeepAlive time.Duration

	// PrefixCache is the engines' prefix cache mode:
	// engine.PrefixCacheRadix ("" is it, the default) or
	// engine.PrefixCacheDisable, with which the router neither routes by
	// sessions nor accounts for what the engines reuse.
	PrefixCache string
	// Sessions configure the session hint (session.go).
	Sessions Sessions
}

// Router routes one model's requests to its engines. The adapter makes it
// with New and serves it, with the other models', through Models; Caddy
// is not needed. Its files follow a request in order (see doc.go).
type Router struct {
	Config

	dec    decoder
	live   *Live
	logger *zap.Logger
	handle *Handle
	roles  map[string][]int // endpoint indexes by the role a call needs
	policy Policy
	// policyName is the policy as /mlc/engines names it.
	policyName string
	// observers are the hooks of the policy and of the router's own
	// bookkeeping (see Observer); readsPrefixes says the policy reads
	// Candidate.PrefixHit.
	observers     observers
	readsPrefixes bool
	readsLatency  bool                // the engines' latency models are kept (latency.go)
	itl           prometheus.Observer // this mode's inter-token latency
	dynamic       Discovered
	*routerState
	client   *engineClient
	strategy strategy
	metrics  *routerMetrics
	vars     func(ctx context.Context, name string, value any)
	gate     gate // admit.go
	attain   attainment
	closed   chan struct{}
}

// Discovered are engines found while the router runs (a fleet.Discovery
// over the adapter's dynamic sources), by the role asked: "" (any), prefill, decode.
type Discovered interface {
	Engines(role string) []*Upstream
}

// Tokenizer turns text into the model's token ids and back; the router
// tokenizes string prompts with it (MLC's handle_completion, step 1).
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// Options are what a Router uses besides its config.
type Options struct {
	// Live is what the process's routers share (the mlc app's); required.
	Live   *Live
	Logger *zap.Logger
	// Handle is the router's way to its fleet of spawned or listed
	// engines; nil for a router with only discovered engines.
	Handle *Handle
	// Discovered are engines found by dynamic sources; nil for none.
	Discovered Discovered
	// Policy chooses among engines; nil: LeastLoaded.
	Policy Policy
	// PolicyName is the policy as operators name it (its module's name,
	// least_loaded), for /mlc/engines; "": least_loaded for a nil
	// Policy, else the policy's Go type.
	PolicyName string
	// SetVar publishes a fact of a served request (the request id, the
	// engines, the tokens) for access logs and later handlers; nil: none.
	SetVar func(ctx context.Context, name string, value any)
	// Queue is where requests wait for the engines' capacity, fair across
	// tenants; one that outlives the router keeps its waiters' order
	// across a reload. nil: a queue of the router's own.
	Queue *fair.Queue
	// Budgets are the tenants' budgets; nil: none.
	Budgets *budget.Limiter
}

// routerState is what a router changes while it serves.
type routerState struct {
	next     atomic.Pointer[Router] // the router that took over after a reload
	retired  atomic.Bool            // its config stopped: new work goes to next
	queued   atomic.Int64           // requests waiting for an engine
	pickMu   sync.Mutex             // makes choosing an engine and holding it atomic
	rotation atomic.Uint64          // where ties start
}

// New makes the router of cfg: it loads the model's tokenizer and chat
// template, and takes the policy and the engines of o.
func New(cfg Config, o Options) (*Router, error) {
	if cfg.Mode != ModeDisagg && cfg.Mode != ModeWhole {
		return nil, fmt.Errorf("mlc_router: mode %q: want %s or %s", cfg.Mode, ModeDisagg, ModeWhole)
	}
	if cfg.Path == "" {
		cfg.Path = cfg.Model
	}
	if o.Live == nil {
		return nil, errors.New("mlc_router: no Live in the options")
	}
	r := &Router{Config: cfg, live: o.Live, logger: o.Logger, handle: o.Handle, dynamic: o.Discovered, vars: o.SetVar, routerState: new(routerState)}
	if r.logger == nil {
		r.logger = zap.NewNop()
	}
	if r.handle == nil {
		r.handle = &Handle{}
	}
	if r.vars == nil {
		r.vars = func(context.Context, string, any) {}
	}
	var err error
	if r.dec, err = newDecoder(&r.Config, r.logger, r.live.largeSlots); err != nil {
		return nil, err
	}
	policy := o.Policy
	r.policyName = o.PolicyName
	if policy == nil {
		policy, r.policyName = new(LeastLoaded), "least_loaded"
	}
	if r.policyName == "" {
		r.policyName = fmt.Sprintf("%T", policy)
	}
	r.setPolicy(policy)
	r.closed = make(chan struct{})
	r.client = newEngineClient(cfg.EngineTimeout, r.logger, &r.live.noFDs)
	r.metrics = sharedMetrics()
	r.itl = r.metrics.itl.WithLabelValues(cfg.Model, cfg.Mode)
	r.strategy = newStrategy(r)
	r.roles = r.strategy.roles(cfg.Endpoints)
	if r.gate, err = newGate(&r.Config, o, r.readyGenerating, r.logger, r.metrics); err != nil {
		return nil, err
	}
	r.gate.predict = func(n int) (time.Duration, time.Duration, bool) {
		return predictFleet(r.candidates(r.strategy.generatingRole()), n)
	}
	if r.gate.batch > 0 {
		goroutine.Go(r.logger, "gate capacity", func() { r.gate.followEngines(r.closed) }, nil)
	}
	r.live.add(r)
	return r, nil
}

// serving returns the router that serves a new attempt of r's requests:
// r, or, once a reload replaced r, the router of the newer config that
// took its place (its engines may be others). Attempts already running
// finish where they are: the old engines drain.
func (r *Router) serving() *Router {
	t := r
	for range 16 { // a chain of quick reloads; bounded against a cycle
		if !t.handedOver() {
			return t
		}
		t = t.next.Load()
	}
	return t
}

// HandOver makes next the router that takes r's new work once r retires
// (a reload).
func (r *Router) HandOver(next *Router) { r.next.Store(next) }

// Retire says r's config stopped: its new work goes to its successor.
func (r *Router) Retire() {
	r.retired.Store(true)
	r.live.changes.notify()
}

// Close drops idle engine connections; the fleet's owner stops the
// engines.
func (r *Router) Close() {
	close(r.closed)
	r.live.remove(r)
	r.client.close()
}

// RoutesSessions reports whether the router routes a session's turns to
// the engine of its last (session.go): the adapter then shares where
// sessions went with the other replicas.
func (r *Router) RoutesSessions() bool { return r.sessionsActive() }

// KeepsPrefixIndex reports whether the router keeps its engines' prefix
// indexes, for a policy that reads Candidate.PrefixHit: the adapter then
// shares what the index learns with the other replicas.
func (r *Router) KeepsPrefixIndex() bool { return r.readsPrefixes }
