package caddymlc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/suggest"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/toolcall"
)

// parseCaddyfile sets up the handler from Caddyfile tokens (see
// UnmarshalCaddyfile).
func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	r := new(Handler)
	err := r.UnmarshalCaddyfile(h.Dispenser)
	return r, err
}

// UnmarshalCaddyfile reads the mlc_router block. Every error names the
// Caddyfile line it comes from. Syntax:
//
//	mlc_router [<matcher>] {
//	    model             <path|name>
//	    path              <path>     (what the engines load; default: the model's name)
//	    model_lib         <path>
//	    embedding_model   <path> [model_lib <lib>] [name <name>]
//	    mode              disagg|whole   (round_robin, round-robin: MLC's names of whole)
//	    pd_balance_factor <float in [0,1)>
//	    max_prefill_queue <n>|off
//	    slo_admission     off|shed [status 503|429] [margin <fraction>]
//	    prefix_cache      [radix|disable]   (default radix)
//	    sessions          off | [header <name>] [balance <calls> <ratio>] [ttl <duration>]
//	    engine            builtin|mlc|command <program> [args...]
//	    engine_args       <args...>
//	    endpoint          <host>:<port> [gpus <n>] [role prefill|decode|any] [external]
//	    dynamic           [prefill|decode|any] <source> [<args...>] {
//	        <source options>
//	    }
//	    scale             <min> [<max>] {   (autoscale the spawned endpoints; see Scale)
//	        up_after <duration>, down_after <duration>, cooldown <duration>, kv_high <share>
//	    }
//	    policy            <name> [<args...>]   (least_loaded, prefix_aware, round_robin, ...)
//	    startup_timeout   <duration>
//	    engine_timeout    <duration>
//	    queue_timeout     <duration>
//	    queue_size        <n>
//	    max_attempts      <n>
//	    max_body_size     <size>
//	    tool_parser       hermes|llama3_json|mistral|pythonic|mlc  (default: the chat template's)
//	    max_tokens_policy cap|refuse   (a max_tokens above what the context leaves, or the limit; default cap)
//	    default_max_tokens <n>       (when a request sends none; default: the rest of the context)
//	    max_tokens_limit  <n>        (the most a request may ask; default: the context)
//	    body_timeout      <duration>
//	    client_timeout    <duration>
//	    prefill_rate      <tokens per second>  (assumed before the latency model predicts; default 1000)
//	    max_prefill_time  <duration>  (the longest prefill allowed a prompt; default 10m)
//	    request_timeout   <duration>  (a request's whole time, all attempts; default none)
//	    keepalive         <duration>|off  (a waiting stream's keep-alive; default 10s)
//	    max_inflight      <n>|off    (requests each generating engine runs at once; default: its batch)
//	    health_uri        <path>     (readiness: 200 when every model can serve, else 503)
//	    tenant            <placeholder>
//	    priority          <placeholder>
//	    tenant_weight     <tenant> <weight>
//	    tenant_priority   <tenant> <band>
//	    budget            <tenant|pattern|*> [tokens_per_minute <n>] [requests_per_minute <n>] [shared]
//	    slo_ttft          <placeholder>|off  (milliseconds; default {http.request.header.X-SLO-TTFT-Ms})
//	    slo_tpot          <placeholder>|off  (milliseconds; default {http.request.header.X-SLO-TPOT-Ms})
//	    tenant_slo        <tenant> [ttft <duration>] [tpot <duration>]
//	    priority_slo      <band> [ttft <duration>] [tpot <duration>]
//	    responses_store   <path>|redis|off (the Responses API's stored responses; default: the cluster's Redis with the mlc cluster option, else mlc/responses.db in Caddy's data directory)
//	    responses_ttl     <duration> (default: 30 days)
//	    responses_max_size <size>    (one stored response, with its conversation; default: 16MiB)
//	    mcp_server        <name> <url> [header <name> <value>]...  (an MCP server hosted tools may call; repeatable)
//	    mcp_allow         <url prefix>...  (URLs hosted tools may call; repeatable)
//	    mcp_timeout       <duration>  (each listing and call; default 30s)
//	    mcp_max_output    <size>      (a call's output, cut beyond; default 64KiB)
//	    mcp_max_rounds    <n>         (rounds of the model one response runs; default 8)
//	    keys              <file>     (API keys checked, each naming its tenant; see Auth and docs/keys.md)
//	    auth_failures     <n>|off    (failed key checks a minute per client address before 429s; default 20)
//	}
//
// Several models, each with its own engines, take a block each; the
// options outside the blocks apply to every model that does not set them:
//
//	mlc_router {
//	    model <name> {
//	        <options of one model, as above>
//	        default                  (the model of requests that name none; default: the first)
//	    }
//	    model <name> { ... }
//	    <options for every model>
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	var modelLines []int
	for d.NextBlock(0) {
		name := d.Val()
		switch name {
		case "model":
			modelLines = append(modelLines, d.Line())
			if err := h.parseModel(d); err != nil {
				return err
			}
			continue
		case "tenant", "priority", "tenant_weight", "tenant_priority", "budget", "cached_token_weight", "slo_ttft", "slo_tpot", "tenant_slo", "priority_slo":
			if err := h.Tenancy.parse(d, seen); err != nil {
				return err
			}
			continue
		case "keys", "auth_failures":
			if err := h.Auth.parse(d, seen); err != nil {
				return err
			}
			continue
		case "responses_store", "responses_ttl", "responses_max_size":
			if err := h.Responses.parse(d, seen); err != nil {
				return err
			}
			continue
		case "mcp_server", "mcp_allow", "mcp_timeout", "mcp_max_output", "mcp_max_rounds":
			if err := h.MCP.parse(d, seen); err != nil {
				return err
			}
			continue
		case "health_uri":
			if err := onceArg(d, seen, &h.HealthURI); err != nil {
				return err
			}
			if !strings.HasPrefix(h.HealthURI, "/") {
				return d.Errf("health_uri %q: want a path", h.HealthURI)
			}
			continue
		}
		if err := parseOption(&h.ModelConfig, d, seen, topLevelOptions); err != nil {
			return err
		}
	}
	return h.checkParsed(d, modelLines)
}

// checkParsed checks the block as a whole: an error points at the
// directive's line, or at the line of the model it is about (modelLines:
// the line of each model option, in order).
func (h *Handler) checkParsed(d *caddyfile.Dispenser, modelLines []int) error {
	models, err := h.models()
	if err == nil {
		for i, m := range models {
			if err := m.builtinModelErr(); err != nil && i < len(modelLines) {
				return fmt.Errorf("%v, at %s:%d", err, d.File(), modelLines[i])
			} else if err != nil {
				return d.Err(err.Error())
			}
		}
		return nil
	}
	d.Reset()
	d.Next()
	return d.Err(err.Error())
}

// parseOption reads one option line into m; seen holds the options
// already given in the same block, extra the other options of the block
// (for the error of an unknown one).
func parseOption(m *ModelConfig, d *caddyfile.Dispenser, seen map[string]bool, extra []string) error {
	name := d.Val()
	parse, ok := subdirectives[name]
	if !ok {
		return unknownOption(d, name, extra)
	}
	if seen[name] && name != "endpoint" && name != "dynamic" {
		return d.Errf("%s given twice", name)
	}
	seen[name] = true
	return parse(m, d)
}

// parseModel reads `model <name>` (the single-model form) or `model
// <name> { <options> }` (one model of several, with its own engines). A
// model block's errors point at its lines, and its endpoints may not be
// another model's.
func (h *Handler) parseModel(d *caddyfile.Dispenser) error {
	line := d.Line()
	var name string
	if !d.NextArg() {
		return d.ArgErr()
	}
	name = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	nesting := d.Nesting()
	if !d.NextBlock(nesting) {
		if h.Model != "" {
			return d.Errf("model given twice (several models take a block each: model <name> { ... })")
		}
		h.Model = name
		return nil
	}
	m := ModelConfig{Model: name}
	seen := map[string]bool{}
	for ok := true; ok; ok = d.NextBlock(nesting) {
		if err := parseOption(&m, d, seen, []string{"default"}); err != nil {
			return err
		}
	}
	for _, other := range h.Models {
		if other.Model == name {
			return d.Errf("model %s given twice", name)
		}
		for _, ep := range m.Endpoints {
			for _, o := range other.Endpoints {
				if o.Addr() == ep.Addr() {
					return d.Errf("model %s (line %d): endpoint %s is model %s's too: give each model its own engines", name, line, ep.Addr(), other.Model)
				}
			}
		}
	}
	h.Models = append(h.Models, m)
	return nil
}

// parseDefault reads `default`: the model of requests that name none.
func parseDefault(m *ModelConfig, d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	m.Default = true
	return nil
}

// parseEmbeddingModel reads `embedding_model <path> [model_lib <lib>]
// [name <name>]`.
func parseEmbeddingModel(m *ModelConfig, d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	m.EmbeddingModel = d.Val()
	for d.NextArg() {
		var dst *string
		switch d.Val() {
		case "model_lib":
			dst = &m.EmbeddingModelLib
		case "name":
			dst = &m.EmbeddingModelName
		default:
			return d.Errf("embedding_model %s: want model_lib <lib> or name <name> after the path, not %q", m.EmbeddingModel, d.Val())
		}
		if *dst != "" || !d.NextArg() {
			return d.Errf("embedding_model %s: %s takes one value, once", m.EmbeddingModel, d.Val())
		}
		*dst = d.Val()
	}
	return nil
}

// subdirectives parse one line of the block each; the dispenser is on the
// subdirective's name.
var subdirectives = map[string]func(*ModelConfig, *caddyfile.Dispenser) error{
	"path":               func(r *ModelConfig, d *caddyfile.Dispenser) error { return oneArg(d, &r.Path) },
	"default":            parseDefault,
	"model_lib":          func(r *ModelConfig, d *caddyfile.Dispenser) error { return oneArg(d, &r.ModelLib) },
	"embedding_model":    parseEmbeddingModel,
	"mode":               parseMode,
	"pd_balance_factor":  parseBalance,
	"max_prefill_queue":  intOption(func(r *ModelConfig) *int { return &r.MaxPrefillQueue }, true),
	"slo_admission":      parseSLOAdmission,
	"max_inflight":       intOption(func(r *ModelConfig) *int { return &r.MaxInflight }, true),
	"prefix_cache":       parsePrefixCache,
	"sessions":           parseSessions,
	"engine":             parseEngine,
	"engine_args":        parseEngineArgs,
	"endpoint":           parseEndpoint,
	"dynamic":            parseDynamic,
	"scale":              parseScale,
	"policy":             parsePolicy,
	"startup_timeout":    durationOption(func(r *ModelConfig) *caddy.Duration { return &r.StartupTimeout }),
	"engine_timeout":     durationOption(func(r *ModelConfig) *caddy.Duration { return &r.EngineTimeout }),
	"queue_timeout":      durationOption(func(r *ModelConfig) *caddy.Duration { return &r.QueueTimeout }),
	"queue_size":         intOption(func(r *ModelConfig) *int { return &r.QueueSize }, false),
	"max_attempts":       intOption(func(r *ModelConfig) *int { return &r.MaxAttempts }, false),
	"max_body_size":      parseMaxBodySize,
	"tool_parser":        choiceOption(func(r *ModelConfig) *string { return &r.ToolParser }, toolcall.Formats()...),
	"max_tokens_policy":  choiceOption(func(r *ModelConfig) *string { return &r.MaxTokensPolicy }, MaxTokensCap, MaxTokensRefuse),
	"default_max_tokens": intOption(func(r *ModelConfig) *int { return &r.DefaultMaxTokens }, false),
	"max_tokens_limit":   intOption(func(r *ModelConfig) *int { return &r.MaxTokensLimit }, false),
	"body_timeout":       durationOption(func(r *ModelConfig) *caddy.Duration { return &r.BodyTimeout }),
	"client_timeout":     durationOption(func(r *ModelConfig) *caddy.Duration { return &r.ClientTimeout }),
	"prefill_rate":       parsePrefillRate,
	"max_prefill_time":   durationOption(func(r *ModelConfig) *caddy.Duration { return &r.MaxPrefillTime }),
	"request_timeout":    durationOption(func(r *ModelConfig) *caddy.Duration { return &r.RequestTimeout }),
	"keepalive":          parseKeepAlive,
}

// parsePrefillRate parses "prefill_rate <tokens per second>".
func parsePrefillRate(r *ModelConfig, d *caddyfile.Dispenser) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return d.Errf("prefill_rate %q: want prompt tokens a second, above 0", s)
	}
	r.PrefillRate = f
	return nil
}

// parseKeepAlive parses "keepalive <duration>|off".
func parseKeepAlive(r *ModelConfig, d *caddyfile.Dispenser) error {
	if args := d.RemainingArgs(); len(args) == 1 && args[0] == "off" {
		r.KeepAlive = -1
		return nil
	} else if len(args) == 1 {
		dur, err := positiveDuration(args[0])
		if err != nil {
			return d.Errf("keepalive %q: %v", args[0], err)
		}
		r.KeepAlive = dur
		return nil
	}
	return d.Errf("keepalive: want one duration, such as 10s, or off")
}

func parseMode(r *ModelConfig, d *caddyfile.Dispenser) error {
	if err := oneArg(d, &r.Mode); err != nil {
		return err
	}
	switch r.Mode = modeName(r.Mode); r.Mode {
	case router.ModeDisagg, router.ModeWhole:
	default:
		return d.Errf("mode %q: want disagg or whole (round_robin, MLC's round-robin)%s", r.Mode, suggest.DidYouMean(r.Mode, []string{router.ModeDisagg, router.ModeWhole}))
	}
	return nil
}

func parseBalance(r *ModelConfig, d *caddyfile.Dispenser) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return d.Errf("pd_balance_factor %q: not a number", s)
	}
	if err := validateBalance(f); err != nil {
		return d.Err(err.Error())
	}
	r.PDBalanceFactor = f
	return nil
}

func parsePrefixCache(r *ModelConfig, d *caddyfile.Dispenser) error {
	r.PrefixCache = engine.PrefixCacheRadix
	if !d.NextArg() {
		return nil
	}
	switch d.Val() {
	case engine.PrefixCacheRadix, engine.PrefixCacheDisable:
		r.PrefixCache = d.Val()
	default:
		return choiceErr(d, "prefix_cache", d.Val(), []string{engine.PrefixCacheRadix, engine.PrefixCacheDisable})
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func parseEngine(r *ModelConfig, d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	p := &EngineProgram{Kind: d.Val()}
	p.Command = d.RemainingArgs()
	if err := p.validate(); err != nil {
		return d.Err(err.Error())
	}
	r.Engine = p
	return nil
}

func parseEngineArgs(r *ModelConfig, d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	r.EngineArgs = args
	return nil
}

func parseEndpoint(r *ModelConfig, d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	host, port, err := engine.ParseAddr(d.Val())
	if err != nil {
		return d.Err(err.Error())
	}
	ep := engine.Endpoint{Host: host, Port: port, GPUs: 1}
	for d.NextArg() {
		if err := endpointOption(d, &ep); err != nil {
			return err
		}
	}
	for _, other := range r.Endpoints {
		if other.Addr() == ep.Addr() {
			return d.Errf("endpoint %s given twice", ep.Addr())
		}
	}
	r.Endpoints = append(r.Endpoints, ep)
	return nil
}

func endpointOption(d *caddyfile.Dispenser, ep *engine.Endpoint) error {
	switch d.Val() {
	case "gpus":
		if !d.NextArg() {
			return d.ArgErr()
		}
		n, err := strconv.Atoi(d.Val())
		if err != nil || n < 1 {
			return d.Errf("gpus %q: want an integer of at least 1", d.Val())
		}
		ep.GPUs = n
	case "role":
		if !d.NextArg() {
			return d.ArgErr()
		}
		switch d.Val() {
		case engine.RolePrefill, engine.RoleDecode, engine.RoleAny:
			ep.Role = d.Val()
		default:
			return choiceErr(d, "role", d.Val(), []string{engine.RolePrefill, engine.RoleDecode, engine.RoleAny})
		}
	case "external":
		ep.External = true
	default:
		return d.Errf("endpoint option %q: want gpus <n>, role <role> or external%s", d.Val(), suggest.DidYouMean(d.Val(), []string{"gpus", "role", "external"}))
	}
	return nil
}

// parseDynamic reads `dynamic [role] <source> ...`: reverse_proxy's own
// dynamic subdirective (any http.reverse_proxy.upstreams module, with its
// arguments and block), with a role in front.
func parseDynamic(r *ModelConfig, d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	role := engine.RoleAny
	switch d.Val() {
	case engine.RolePrefill, engine.RoleDecode, engine.RoleAny:
		role = d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
	}
	name := d.Val()
	modID := "http.reverse_proxy.upstreams." + name
	unm, err := caddyfile.UnmarshalModule(d, modID)
	if err != nil {
		return err
	}
	src, ok := unm.(reverseproxy.UpstreamSource)
	if !ok {
		return d.Errf("module %s (%T) is not an upstream source", modID, unm)
	}
	if r.Dynamic == nil {
		r.Dynamic = &DynamicEngines{}
	}
	dst := map[string]*json.RawMessage{engine.RoleAny: &r.Dynamic.AnyRaw, engine.RolePrefill: &r.Dynamic.PrefillRaw, engine.RoleDecode: &r.Dynamic.DecodeRaw}[role]
	if *dst != nil {
		return d.Errf("dynamic %s engines given twice", role)
	}
	*dst = caddyconfig.JSONModuleObject(src, "source", name, nil)
	return nil
}

// parsePolicy reads `policy <name> [args...]`: the selection policy
// module of that name, with its own Caddyfile arguments if it reads any
// (as reverse_proxy's lb_policy).
func parsePolicy(r *ModelConfig, d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	name := d.Val()
	modID := policyNamespace + "." + name
	info, err := caddy.GetModule(modID)
	if err != nil {
		var names []string
		for _, m := range caddy.GetModules(policyNamespace) {
			names = append(names, m.ID.Name())
		}
		return d.Errf("policy %q: no selection policy of that name (module %s)%s; the policies of this Caddy: %s",
			name, modID, suggest.DidYouMean(name, names), strings.Join(names, ", "))
	}
	var mod any = info.New()
	if _, ok := mod.(caddyfile.Unmarshaler); ok {
		if mod, err = caddyfile.UnmarshalModule(d, modID); err != nil {
			return err
		}
	} else if len(d.NextSegment()) > 1 {
		return d.Errf("policy %s takes no arguments", name)
	}
	if _, ok := mod.(router.Policy); !ok {
		return d.Errf("module %s (%T) is not a selection policy", modID, mod)
	}
	r.PolicyRaw = caddyconfig.JSONModuleObject(mod, "policy", name, nil)
	return nil
}

// durationOption parses "<name> <duration>" (positive) into field.
func durationOption(field func(*ModelConfig) *caddy.Duration) func(*ModelConfig, *caddyfile.Dispenser) error {
	return func(r *ModelConfig, d *caddyfile.Dispenser) error {
		return durationArg(d, d.Val(), field(r))
	}
}

// intOption parses "<name> <n>" (at least 1; with off, "off" too for -1)
// into field.
func intOption(field func(*ModelConfig) *int, off bool) func(*ModelConfig, *caddyfile.Dispenser) error {
	return func(r *ModelConfig, d *caddyfile.Dispenser) error {
		return countArg(d, d.Val(), field(r), off)
	}
}

func parseMaxBodySize(r *ModelConfig, d *caddyfile.Dispenser) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n < 1 {
		return d.Errf("max_body_size %q: want a size such as 4MiB", s)
	}
	r.MaxBodySize = int64(n)
	return nil
}
