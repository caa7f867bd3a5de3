package caddymlc

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/toolcall"
)

// The max_tokens policies.
const (
	MaxTokensCap    = "cap"
	MaxTokensRefuse = "refuse"
)

// Defaults of the configuration.
const (
	DefaultHost           = "127.0.0.1"
	DefaultPort           = 8080
	DefaultMaxAttempts    = router.DefaultMaxAttempts
	DefaultStartupTimeout = caddy.Duration(120e9)
)

// Handler is the mlc_router handler. Its JSON fields are the configuration:
// one model (the fields of ModelConfig, inline), or several (Models), each
// with its own engines, whose unset options take the inline ones.
type Handler struct {
	ModelConfig

	// Models are the models served, each with its own fleet: a request
	// goes to the model its "model" field names, or to the default
	// model when it names none. With Models, the inline options apply to
	// every model that does not set them (endpoints and dynamic sources
	// excepted: each model lists its own), and the inline model is empty.
	Models []ModelConfig `json:"models,omitempty"`

	// HealthURI is a path answered with the router's readiness, for a
	// load balancer or a Kubernetes readiness probe: 200 when every model
	// has what it needs to serve (a ready engine; in disagg a decode
	// engine, which can prefill alone), else 503 with a JSON body that
	// names what is missing. It asks no engine. Empty: none.
	HealthURI string `json:"health_uri,omitempty"`

	// Tenancy says who each request is for and what tenants may spend
	// (tenants.go).
	Tenancy

	// Responses says where the Responses API keeps stored responses
	// (responses.go).
	Responses

	// MCP says which MCP servers the Responses API's hosted MCP tools
	// may call (mcp.go).
	MCP

	// Auth checks clients' API keys (auth.go).
	Auth

	// Set by Provision.
	logger *zap.Logger
	proc   *process // the mlc app's: whether Caddy exits (shutdown.go)
	served []*served
	front  *router.Models
	held   []string // usage pool keys of the shared queues, budgets, response store and keys
	// keys are the keys file's keys, nil without one; failures counts
	// the failed checks by client address.
	keys     *apikeys.Keyring
	failures *apikeys.FailureLimiter
	// stopFailures stops sharing failed key checks with the other
	// replicas (nil: none shared).
	stopFailures func()
	// access writes the access log lines Caddy's would show a
	// credential in (accesslog.go).
	access *redactingLog
}

// ModelConfig is one model and its fleet. Each field names the `mlc_llm
// router` option it stands for.
type ModelConfig struct {
	// Model is the model's name, which clients send and answers carry:
	// "tiny" (the built-in engine's embedded model) or a model directory
	// or name. Required. MLC: the positional model argument.
	Model string `json:"model,omitempty"`

	// Path is what the engines load, when it differs from the name
	// clients use; default: Model.
	Path string `json:"path,omitempty"`

	// Default makes this the model of requests that name none (default:
	// the first model).
	Default bool `json:"default,omitempty"`

	// EmbeddingModel is an embedding model the engines load beside the
	// chat model, served at /v1/embeddings under its own name (see
	// EmbeddingModelName) and, as before, under this model's name.
	// MLC: --embedding-model.
	EmbeddingModel string `json:"embedding_model,omitempty"`

	// EmbeddingModelName is the name clients give the embedding model
	// (listed in /v1/models); default: EmbeddingModel as written, the
	// name MLC's server hosts it under.
	EmbeddingModelName string `json:"embedding_model_name,omitempty"`

	// EmbeddingModelLib is the embedding model's compiled library.
	// MLC: --embedding-model-lib.
	EmbeddingModelLib string `json:"embedding_model_lib,omitempty"`

	// ModelLib is the compiled model library given to every engine.
	// MLC: --model-lib.
	ModelLib string `json:"model_lib,omitempty"`

	// Mode is "disagg" (the default) or "whole": each whole request to
	// one engine, chosen by the policy. MLC's name of whole,
	// "round-robin" (or "round_robin"), is accepted for it.
	// MLC: --router-mode (disagg|round-robin).
	Mode string `json:"mode,omitempty"`

	// PDBalanceFactor in [0, 1) moves the end of the KV window computed by
	// the prefill engine towards the start of the prompt: the decode engine
	// prefills the last PDBalanceFactor of it. Default 0.
	// MLC: --pd-balance-factor.
	PDBalanceFactor float64 `json:"pd_balance_factor,omitempty"`

	// MaxInflight bounds the requests the router runs at once on each
	// generating engine (a decode engine in disagg, any engine in whole
	// mode), holding the rest in its own fair queue: default (0) the
	// engine's batch where the router can know it: for engines it spawns
	// (none external or dynamic), the built-in engine's max_num_sequence,
	// MLC's --overrides max_num_sequence or --mode local/interactive;
	// -1 (Caddyfile: off) no bound.
	MaxInflight int `json:"max_inflight,omitempty"`

	// MaxPrefillQueue is conditional disaggregation: when every prefill
	// engine already has this many calls in flight (remote_sends queued or
	// computing, from this router and, as the engines report it, from
	// others), the decode engine prefills the request itself, unless it
	// is saturated. Prefill then never queues deeper than this while a
	// decode engine has room, and a prefill engine that is the fleet's
	// bottleneck shares its work. Default 2 (router.DefaultMaxPrefillQueue); -1
	// (Caddyfile: off) always disaggregates, as MLC's router does.
	// Not an MLC option (NVIDIA Dynamo's max_prefill_queue_size).
	MaxPrefillQueue int `json:"max_prefill_queue,omitempty"`

	// SLOAdmission is what the gate does with a request whose time to
	// first token is predicted to miss its target (see SLOs) on every
	// engine. Default: nothing, it is served late.
	SLOAdmission *SLOAdmission `json:"slo_admission,omitempty"`

	// PrefixCache is "radix" (the default) or "disable": the engines'
	// --prefix-cache-mode. The one default that differs from MLC's
	// router (whose --enable-prefix-cache is off), matching `mlc_llm
	// serve`'s own, vLLM's and SGLang's: agents resend their whole
	// history every turn, which a cache serves again from memory.
	PrefixCache string `json:"prefix_cache,omitempty"`

	// Sessions route a conversation's turns to the engine of its last
	// (see Sessions). Default: on, while the prefix cache is.
	Sessions *Sessions `json:"sessions,omitempty"`

	// Engine says which program runs the engines. Default: the built-in
	// CPU engine.
	Engine *EngineProgram `json:"engine,omitempty"`

	// EngineArgs are appended to every spawned engine's command line.
	EngineArgs []string `json:"engine_args,omitempty"`

	// Endpoints are the engines, in NVSHMEM PE order. Default: one
	// endpoint 127.0.0.1:8080 with 1 GPU. MLC: --endpoint-hosts,
	// --endpoint-ports, --endpoint-num-gpus.
	Endpoints []engine.Endpoint `json:"endpoints,omitempty"`

	// Scale autoscales the spawned endpoints: between its min and max of
	// them run, by load (see Scale). Default: all of them, always.
	Scale *Scale `json:"scale,omitempty"`

	// Dynamic are engines found while Caddy runs, by reverse_proxy's
	// upstream sources (DNS A/AAAA or SRV records, ...), one source per
	// role. With dynamic engines, Endpoints may be empty.
	Dynamic *DynamicEngines `json:"dynamic,omitempty"`

	// PolicyRaw is the selection policy, how the router chooses among
	// healthy engines: a module of the namespace
	// http.handlers.mlc_router.selection_policies, its name under
	// "policy" ({"policy": "prefix_aware"}): least_loaded (the default,
	// LeastLoadedSelection), prefix_aware (PrefixAwareSelection),
	// round_robin (RoundRobinSelection), or one built in from elsewhere
	// (see Policy). A bare name
	// ("policy": "prefix_aware", the form before policies were modules)
	// is read as that module.
	PolicyRaw json.RawMessage `json:"policy,omitempty" caddy:"namespace=http.handlers.mlc_router.selection_policies inline_key=policy"`

	// StartupTimeout bounds how long the engines may take to become ready.
	// Default 120s.
	StartupTimeout caddy.Duration `json:"startup_timeout,omitempty"`

	// MaxAttempts is the number of attempts in a row a request gets that
	// deliver no text (the first and its retries after preemption or an
	// engine failure): one that keeps delivering text, resumed after
	// preemptions, goes on to its end. Default 16.
	MaxAttempts int `json:"max_attempts,omitempty"`

	// ToolParser names how the model writes tool calls, so that the
	// router reads them back out of its answers (router/toolcall):
	// hermes, llama3_json, mistral, pythonic or mlc. Default: the one its
	// chat template teaches (tiny's: hermes; an MLC conversation template
	// with a function_string: mlc; a Jinja template's family, from its
	// text). A model with none refuses tools.
	ToolParser string `json:"tool_parser,omitempty"`

	// MaxTokensPolicy is what a max_tokens (max_output_tokens) above
	// what the context leaves after the prompt gets: "cap" (default:
	// capped to what the context leaves; the answer ends by length) or
	// "refuse" (OpenAI's 400 context_length_exceeded).
	MaxTokensPolicy string `json:"max_tokens_policy,omitempty"`

	// DefaultMaxTokens is the max_tokens (max_output_tokens) of a request
	// that sends none. Default: none, as MLC's engines run: the rest of
	// the context.
	DefaultMaxTokens int `json:"default_max_tokens,omitempty"`

	// MaxTokensLimit bounds the max_tokens a request may ask: a larger
	// one is capped to it, or refused under max_tokens_policy refuse.
	// Default: none but the context.
	MaxTokensLimit int `json:"max_tokens_limit,omitempty"`

	// MaxBodySize bounds a request body, in bytes. Default 4 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// EngineTimeout bounds how long an engine may keep a call waiting for
	// its first byte, and the longest silence inside a stream. A stream
	// whose engine falls silent is resumed on another engine, exactly as
	// a preempted one. Default 15s (see router.DefaultEngineTimeout).
	EngineTimeout caddy.Duration `json:"engine_timeout,omitempty"`

	// QueueTimeout bounds how long a request waits for an engine when none
	// is ready (engines starting or restarting, a reload); then it gets a
	// 503 with Retry-After. Default 30s.
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`

	// QueueSize bounds the requests waiting for an engine at once; more
	// get a 503 at once. Default 1024.
	QueueSize int `json:"queue_size,omitempty"`

	// BodyTimeout bounds how long a request body may take to arrive;
	// then the client gets a 408 and the connection closes. Caddy's own
	// servers { timeouts { read_body } } bounds the whole request read
	// and applies too, whichever ends first. Default 20s (see
	// router.DefaultBodyTimeout).
	BodyTimeout caddy.Duration `json:"body_timeout,omitempty"`

	// ClientTimeout bounds how long a client may go without accepting a
	// byte of its answer; then the router lets it go as if it had left:
	// the engines stop generating for it and free its KV. Default 30s
	// (see router.DefaultClientTimeout).
	ClientTimeout caddy.Duration `json:"client_timeout,omitempty"`

	// PrefillRate is the prefill speed, in prompt tokens a second,
	// assumed of an engine before its latency model (slo_aware's) can
	// predict: a call's first byte is allowed engine_timeout plus the
	// prompt's predicted prefill time, during which the engine is probed
	// rather than given up. Default 1000 (see router.DefaultPrefillRate).
	PrefillRate float64 `json:"prefill_rate,omitempty"`

	// MaxPrefillTime bounds the prefill time allowed a prompt; a prompt
	// predicted to take longer on every engine is refused up front (413
	// prompt_too_long). Default 10m.
	MaxPrefillTime caddy.Duration `json:"max_prefill_time,omitempty"`

	// RequestTimeout bounds a request's whole time, its queueing and all
	// its attempts; then it ends with a 504 in its API's error shape.
	// Default: none.
	RequestTimeout caddy.Duration `json:"request_timeout,omitempty"`

	// KeepAlive is how often a streamed answer that has nothing to send
	// (a long prefill, a stream being resumed) sends a keep-alive: an SSE
	// comment, or Anthropic's ping event on /v1/messages. Negative: never.
	// Default 10s.
	KeepAlive caddy.Duration `json:"keepalive,omitempty"`
}

// EngineProgram selects the engine program.
type EngineProgram struct {
	// Kind is "builtin" (caddy-mlc's CPU engine, run as `<this binary>
	// mlc-engine`), "mlc" (`python3 -m mlc_llm serve`) or "command".
	Kind string `json:"kind"`
	// Command is the program and its arguments for kind "command"; the MLC
	// serve arguments follow them.
	Command []string `json:"command,omitempty"`
}

// withDefaults returns a copy of the model's configuration with defaults
// applied.
func (m ModelConfig) withDefaults() ModelConfig {
	c := m
	c.Path = cmp.Or(c.Path, c.Model)
	c.EmbeddingModelName = cmp.Or(c.EmbeddingModelName, c.EmbeddingModel)
	c.Mode = modeName(cmp.Or(c.Mode, router.ModeDisagg))
	c.PrefixCache = cmp.Or(c.PrefixCache, engine.PrefixCacheRadix)
	if c.Engine == nil {
		c.Engine = &EngineProgram{Kind: string(engine.KindBuiltin)}
	}
	if len(c.Endpoints) == 0 && c.Dynamic == nil {
		c.Endpoints = []engine.Endpoint{{Host: DefaultHost, Port: DefaultPort, GPUs: 1}}
	}
	c.PolicyRaw = modulePolicy(c.PolicyRaw)
	c.Endpoints = append([]engine.Endpoint(nil), c.Endpoints...)
	for i := range c.Endpoints {
		c.Endpoints[i].GPUs = cmp.Or(c.Endpoints[i].GPUs, 1)
	}
	c.StartupTimeout = cmp.Or(c.StartupTimeout, DefaultStartupTimeout)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.MaxBodySize = cmp.Or(c.MaxBodySize, protocol.DefaultMaxBodyBytes)
	c.EngineTimeout = cmp.Or(c.EngineTimeout, caddy.Duration(router.DefaultEngineTimeout))
	c.QueueTimeout = cmp.Or(c.QueueTimeout, caddy.Duration(router.DefaultQueueTimeout))
	c.QueueSize = cmp.Or(c.QueueSize, router.DefaultQueueSize)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, caddy.Duration(router.DefaultBodyTimeout))
	c.ClientTimeout = cmp.Or(c.ClientTimeout, caddy.Duration(router.DefaultClientTimeout))
	c.PrefillRate = cmp.Or(c.PrefillRate, router.DefaultPrefillRate)
	c.MaxPrefillTime = cmp.Or(c.MaxPrefillTime, caddy.Duration(router.DefaultMaxPrefillTime))
	c.KeepAlive = cmp.Or(c.KeepAlive, caddy.Duration(router.DefaultKeepAlive))
	c.MaxPrefillQueue = cmp.Or(c.MaxPrefillQueue, router.DefaultMaxPrefillQueue)
	c.Scale = c.Scale.withDefaults(len(engine.Spawned(c.Endpoints)))
	return c
}

// Validate checks the configuration. The Caddyfile adapter runs the same
// checks, so a Caddyfile error points at its line.
func (h *Handler) Validate() error {
	if w := h.CachedTokenWeight; w != nil && (*w < 0 || math.IsInf(*w, 0) || math.IsNaN(*w)) {
		return fmt.Errorf("mlc_router: cached_token_weight %v: want a number, 0 or more", *w)
	}
	_, err := h.models()
	return err
}

// modeName is the router's name of a mode: MLC's names of whole mode
// (its --router-mode round-robin, or round_robin) are accepted for it.
func modeName(mode string) string {
	if mode == "round-robin" || mode == "round_robin" {
		return router.ModeWhole
	}
	return mode
}

func (c ModelConfig) validate() error {
	if strings.TrimSpace(c.Model) == "" {
		return errors.New("mlc_router: model is required")
	}
	if c.EmbeddingModelName != "" && c.EmbeddingModel == "" {
		return fmt.Errorf("mlc_router: embedding_model_name %q without an embedding_model", c.EmbeddingModelName)
	}
	if c.Mode != router.ModeDisagg && c.Mode != router.ModeWhole {
		return fmt.Errorf("mlc_router: mode %q: want disagg or whole (round_robin, MLC's round-robin)", c.Mode)
	}
	if err := validateBalance(c.PDBalanceFactor); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if c.PrefixCache != engine.PrefixCacheRadix && c.PrefixCache != engine.PrefixCacheDisable {
		return fmt.Errorf("mlc_router: prefix_cache %q: want radix or disable", c.PrefixCache)
	}
	if err := c.Engine.validate(); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if len(c.Endpoints) > 0 || c.Dynamic == nil {
		if err := engine.ValidateEndpoints(c.Endpoints); err != nil {
			return fmt.Errorf("mlc_router: %w", err)
		}
	}
	if err := c.checkRoles(); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if err := c.validateScale(); err != nil {
		return err
	}
	if c.StartupTimeout < 0 {
		return fmt.Errorf("mlc_router: startup_timeout must be positive")
	}
	if c.MaxAttempts < 1 {
		return fmt.Errorf("mlc_router: max_attempts must be at least 1, got %d", c.MaxAttempts)
	}
	if c.MaxBodySize < 0 {
		return fmt.Errorf("mlc_router: max_body_size must not be negative")
	}
	if err := c.validateAnswers(); err != nil {
		return err
	}
	if c.MaxInflight < -1 {
		return fmt.Errorf("mlc_router: max_inflight must be at least 1, or -1 (off), got %d", c.MaxInflight)
	}
	if c.MaxPrefillQueue < -1 {
		return fmt.Errorf("mlc_router: max_prefill_queue must be at least 1, or -1 (off), got %d", c.MaxPrefillQueue)
	}
	if err := c.Sessions.validate(); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if err := c.SLOAdmission.validate(); err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	if c.EngineTimeout < 0 || c.QueueTimeout < 0 || c.QueueSize < 0 || c.BodyTimeout < 0 || c.ClientTimeout < 0 {
		return fmt.Errorf("mlc_router: engine_timeout, queue_timeout, queue_size, body_timeout and client_timeout must not be negative")
	}
	if c.PrefillRate < 0 || c.MaxPrefillTime < 0 || c.RequestTimeout < 0 {
		return fmt.Errorf("mlc_router: prefill_rate, max_prefill_time and request_timeout must not be negative")
	}
	return nil
}

// validateAnswers checks the options of how answers are read and
// bounded: tool_parser, max_tokens_policy, default_max_tokens and
// max_tokens_limit.
func (c ModelConfig) validateAnswers() error {
	if c.ToolParser != "" && !slices.Contains(toolcall.Formats(), c.ToolParser) {
		return fmt.Errorf("mlc_router: tool_parser %q: want one of %s", c.ToolParser, strings.Join(toolcall.Formats(), ", "))
	}
	switch c.MaxTokensPolicy {
	case "", MaxTokensCap, MaxTokensRefuse:
	default:
		return fmt.Errorf("mlc_router: max_tokens_policy %q: want %s or %s", c.MaxTokensPolicy, MaxTokensCap, MaxTokensRefuse)
	}
	switch {
	case c.DefaultMaxTokens < 0 || c.MaxTokensLimit < 0:
		return fmt.Errorf("mlc_router: default_max_tokens and max_tokens_limit must not be negative")
	case c.MaxTokensLimit > 0 && c.DefaultMaxTokens > c.MaxTokensLimit:
		return fmt.Errorf("mlc_router: default_max_tokens %d is above max_tokens_limit %d", c.DefaultMaxTokens, c.MaxTokensLimit)
	}
	return nil
}

func validateBalance(f float64) error {
	if math.IsNaN(f) || f < 0 || f >= 1 {
		return fmt.Errorf("pd_balance_factor %v: want a number in [0, 1)", f)
	}
	return nil
}

func (p *EngineProgram) validate() error { return p.configure(&engine.Spec{}) }

// configure sets the kind and program of spec from p, as its kind does.
func (p *EngineProgram) configure(spec *engine.Spec) error {
	k := engine.Kind(p.Kind)
	if !k.Registered() {
		return fmt.Errorf("engine %q: want one of %q", p.Kind, engine.Kinds())
	}
	spec.Kind = k
	return k.Driver().Configure(spec, p.Command)
}

// checkRoles makes sure a disagg router has engines of both roles, listed
// or found by a dynamic source.
func (c ModelConfig) checkRoles() error {
	if c.Mode != router.ModeDisagg {
		return nil
	}
	if c.Dynamic == nil {
		_, _, err := router.SplitRoles(c.Endpoints)
		return err
	}
	for _, role := range []string{engine.RolePrefill, engine.RoleDecode} {
		if !c.Dynamic.has(role) && len(router.RoleIndexes(c.Mode, c.Endpoints)[role]) == 0 {
			return fmt.Errorf("disagg mode needs %s engines: list one with role %s or any, or add a dynamic source for %s or any engines", role, role, role)
		}
	}
	return nil
}
