package caddymlc

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/caddymlc/internal/apikeys"
	"github.com/caddy-mlc/caddy-mlc/cluster"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
	"github.com/caddy-mlc/caddy-mlc/router/fair"
)

// Tenancy says who each request is for, how the engines are shared among
// them when requests wait, and what each may spend. Every model of the
// handler shares it.
//
// Caddyfile:
//
//	tenant          <placeholder>      (e.g. {http.request.header.X-Api-Key}, {http.auth.user.id}, {http.request.remote.host})
//	priority        <placeholder>      (an integer band; higher is served first)
//	tenant_weight   <tenant> <weight>
//	tenant_priority <tenant> <band>
//	budget          <tenant|pattern|*> [tokens_per_minute <n>] [requests_per_minute <n>] [shared]
//	cached_token_weight <weight>
//	slo_ttft, slo_tpot, tenant_slo, priority_slo (see SLOs)
type Tenancy struct {
	// Tenant names who a request is for, from Caddy placeholders. Empty:
	// every request is the one default tenant.
	Tenant string `json:"tenant,omitempty"`

	// Priority is a request's band, from Caddy placeholders: an integer,
	// higher served first when requests wait for engines. A request whose
	// priority is empty or not an integer takes its tenant's band
	// (TenantPriorities), else 0.
	Priority string `json:"priority,omitempty"`

	// TenantWeights are tenants' shares of the engines while requests
	// wait, in tokens (default 1 each): a tenant of weight 2 is served
	// twice the tokens of one of weight 1.
	TenantWeights map[string]float64 `json:"tenant_weights,omitempty"`

	// TenantPriorities are tenants' bands.
	TenantPriorities map[string]int `json:"tenant_priorities,omitempty"`

	// Budgets are what tenants may spend per minute, in tokens (prompt and
	// generated) and requests; over budget a request gets OpenAI's 429
	// rate_limit_exceeded with Retry-After, and every answer carries the
	// x-ratelimit-* headers. Kept per Caddy process, or, with the mlc
	// app's cluster option, in Redis, shared by the replicas (see
	// docs/scaling-out.md).
	Budgets []budget.Rule `json:"budgets,omitempty"`

	// CachedTokenWeight is what a prompt token the engines reused from
	// their prefix caches (the usage's cached tokens) costs a budget,
	// against 1 for a prompt token computed: 0.1 charges a cached token
	// a tenth. Default 1: every token the same.
	CachedTokenWeight *float64 `json:"cached_token_weight,omitempty"`

	// SLOs are the requests' latency targets.
	SLOs
}

// facts reads who req is for and its latency targets.
func (h *Handler) facts(req *http.Request) router.Facts { return h.factsFor(req, "") }

// factsFor is facts for tenant, when not empty (the name of the
// request's API key), else for the tenant placeholder's.
func (h *Handler) factsFor(req *http.Request, tenant string) router.Facts {
	f := router.Facts{Tenant: tenant}
	repl, _ := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil && h.Tenant != "" && tenant == "" {
		f.Tenant = h.tenantOf(repl)
	}
	f.Band = h.TenantPriorities[f.Tenant]
	if repl != nil && h.Priority != "" {
		if band, err := strconv.Atoi(strings.TrimSpace(repl.ReplaceAll(h.Priority, ""))); err == nil {
			f.Band = band
		}
	}
	f.Targets = h.targets(req, repl, f)
	return f
}

// tenantOf is the tenant the tenant placeholder names (apikeys.TenantName:
// a credential's digest, never the credential).
func (h *Handler) tenantOf(repl *caddy.Replacer) string {
	return apikeys.TenantName(h.Tenant, repl.ReplaceAll(h.Tenant, ""))
}

// warnCredentialTenant warns, when the config is loaded or validated,
// that the tenant placeholder reads a credential: it is digested, and
// nothing checks it (the keys option does).
func (h *Handler) warnCredentialTenant() {
	if p := apikeys.CredentialPlaceholder(h.Tenant); p != "" && h.keys == nil {
		h.logger.Warn("tenant reads a credential: each value is shown only as its digest (key:<12 hex digits>), and no key is checked; "+
			"use keys to check API keys and name their tenants (docs/keys.md)", zap.String("tenant", h.Tenant), zap.String("placeholder", p))
	}
}

// The fair queues (one per model) and the budgets (one per process)
// outlive a config: a reload keeps the waiting requests' order and the
// tenants' spending.
var shared = caddy.NewUsagePool()

const budgetsKey = "mlc-budgets"

// provisionQueue returns the fair queue of model m, kept across reloads
// and updated to this config.
func (h *Handler) provisionQueue(m ModelConfig) (*fair.Queue, error) {
	cfg := fair.Config{MaxWaiting: m.QueueSize, Timeout: time.Duration(m.QueueTimeout), Weights: h.TenantWeights}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mlc_router: %w", err)
	}
	key := "mlc-fair/" + m.Model
	val, loaded, err := shared.LoadOrNew(key, func() (caddy.Destructor, error) { return fair.New(cfg) })
	if err != nil {
		return nil, fmt.Errorf("mlc_router: %w", err)
	}
	h.held = append(h.held, key)
	q := val.(*fair.Queue)
	if loaded {
		if err := q.Update(cfg); err != nil {
			return nil, fmt.Errorf("mlc_router: %w", err)
		}
	}
	return q, nil
}

// provisionBudgets returns the process's budgets with this config's
// rules, or nil when it has none. With the cluster option they live in
// its Redis, shared by the replicas, with local buckets to fall back on
// while Redis is away; the budgets are kept apart from those of another
// cluster option (or none), so that a reload that changes it starts them
// on the new store.
func (h *Handler) provisionBudgets(link *clusterLink) (*budget.Limiter, error) {
	if len(h.Budgets) == 0 {
		return nil, nil
	}
	key := budgetsKey
	opts := budget.Options{Rules: h.Budgets}
	if link != nil {
		key = fmt.Sprintf("%s/%s/%d", budgetsKey, link.key, link.replicas)
		opts.Store, opts.Fallback, opts.Replicas = cluster.NewBudgetStore(link.conn), budget.NewMemoryStore(), link.replicas
	}
	val, loaded, err := shared.LoadOrNew(key, func() (caddy.Destructor, error) {
		return budget.New(opts)
	})
	if err != nil {
		return nil, fmt.Errorf("mlc_router: budgets: %w", err)
	}
	h.held = append(h.held, key)
	l := val.(*budget.Limiter)
	if loaded {
		if err := l.SetRules(h.Budgets); err != nil {
			return nil, fmt.Errorf("mlc_router: budgets: %w", err)
		}
	}
	return l, nil
}

// releaseShared lets go of the queues and budgets this config held.
func (h *Handler) releaseShared() {
	for _, key := range h.held {
		_, _ = shared.Delete(key)
	}
	h.held = nil
}

// parse reads one tenancy line of the Caddyfile; seen holds the options
// already given.
func (t *Tenancy) parse(d *caddyfile.Dispenser, seen map[string]bool) error {
	name := d.Val()
	switch name {
	case "tenant", "priority":
		dst := &t.Tenant
		if name == "priority" {
			dst = &t.Priority
		}
		if err := onceArg(d, seen, dst); err != nil {
			return err
		}
		return placeholderArg(d, name, *dst)
	case "tenant_weight":
		args := d.RemainingArgs()
		if len(args) != 2 {
			return d.ArgErr()
		}
		w, err := strconv.ParseFloat(args[1], 64)
		if err != nil || !(w > 0) || math.IsInf(w, 0) {
			return d.Errf("tenant_weight %s %q: want a positive number", args[0], args[1])
		}
		setKey(&t.TenantWeights, args[0], w)
	case "tenant_priority":
		args := d.RemainingArgs()
		if len(args) != 2 {
			return d.ArgErr()
		}
		band, err := strconv.Atoi(args[1])
		if err != nil {
			return d.Errf("tenant_priority %s %q: want an integer band", args[0], args[1])
		}
		setKey(&t.TenantPriorities, args[0], band)
	case "budget":
		return t.parseBudget(d)
	case "cached_token_weight":
		var v string
		if err := onceArg(d, seen, &v); err != nil {
			return err
		}
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
			return d.Errf("cached_token_weight %q: want a number, 0 or more", v)
		}
		t.CachedTokenWeight = &w
	case "slo_ttft", "slo_tpot", "tenant_slo", "priority_slo":
		return t.SLOs.parse(d, seen)
	}
	return nil
}

// parseBudget reads `budget <tenant> [tokens_per_minute <n>]
// [requests_per_minute <n>] [shared]`.
// placeholderArg refuses a tenant or priority that is not a placeholder
// (every request would be the same tenant): a word that looks like a
// header's name is shown as the header's placeholder.
func placeholderArg(d *caddyfile.Dispenser, name, v string) error {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return nil
	}
	return d.Errf("%s %q: want a placeholder, read from each request, such as {http.request.header.%s} (a header), "+
		"{http.auth.user.id} (after basic_auth) or {http.request.remote.host}", name, v, headerName(v, name))
}

// headerName is v if it could be a header's name, else an example.
func headerName(v, option string) string {
	if v != "" && !strings.ContainsAny(v, "{}. /:") {
		return v
	}
	if option == "priority" {
		return "X-Priority"
	}
	return "X-Api-Key"
}

func (t *Tenancy) parseBudget(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 {
		return d.ArgErr()
	}
	rule := budget.Rule{Tenant: args[0]}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "shared":
			rule.Shared = true
		case "tokens_per_minute", "requests_per_minute":
			if i+1 >= len(args) {
				return d.Errf("budget %s: %s needs a number", rule.Tenant, args[i])
			}
			n, err := strconv.ParseInt(args[i+1], 10, 64)
			if err != nil || n < 1 {
				return d.Errf("budget %s: %s %q: want a positive integer", rule.Tenant, args[i], args[i+1])
			}
			if args[i] == "tokens_per_minute" {
				rule.TokensPerMinute = n
			} else {
				rule.RequestsPerMinute = n
			}
			i++
		default:
			return d.Errf("budget %s: unknown option %q (tokens_per_minute, requests_per_minute, shared)", rule.Tenant, args[i])
		}
	}
	if rule.TokensPerMinute == 0 && rule.RequestsPerMinute == 0 {
		return d.Errf("budget %s: give tokens_per_minute or requests_per_minute", rule.Tenant)
	}
	t.Budgets = append(t.Budgets, rule)
	if _, err := budget.New(budget.Options{Rules: t.Budgets}); err != nil {
		return d.Errf("budget %s: %v", rule.Tenant, err)
	}
	return nil
}
