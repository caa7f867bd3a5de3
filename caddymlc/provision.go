package caddymlc

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/fleet"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
)

// Provision applies defaults, registers each model's engine fleet with
// the mlc app (which starts it with the config), loads the selection
// policies and the dynamic sources, and makes each model's routing core.
func (h *Handler) Provision(ctx caddy.Context) error {
	ms, err := h.models()
	if err != nil {
		return err
	}
	h.logger = ctx.Logger()
	limitUnsentOnAccept(ctx)
	appVal, err := ctx.App("mlc")
	if err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	app := appVal.(*App)
	h.proc = app.proc
	if err := h.provisionAuth(app); err != nil {
		return err
	}
	h.warnCredentialTenant()
	h.access = newRedactingLog(ctx, h.credentialHeaders())
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("mlc_router: metrics: %w", err)
	}
	budgets, err := h.provisionBudgets(app.cluster)
	if err != nil {
		return err
	}
	cores := make([]*router.Router, 0, len(ms))
	for _, m := range ms {
		s, err := h.provisionModel(ctx, app, m, budgets)
		if err != nil {
			return err
		}
		h.served = append(h.served, s)
		cores = append(cores, s.core)
	}
	h.front = router.NewModels(cores, defaultModel(ms))
	if err := h.provisionResponses(app.cluster); err != nil {
		return err
	}
	if err := h.provisionMCP(); err != nil {
		return err
	}
	for _, s := range h.served {
		app.adopt(s)
	}
	return nil
}

// served is one model of the handler: its config, its routing core, and
// what the adapter runs for it (its dynamic sources).
type served struct {
	owner   *Handler
	cfg     ModelConfig
	logger  *zap.Logger
	dynamic *fleet.Discovery
	core    *router.Router
	live    *router.Live // the app's
	// lifecycle is the app's: it makes the discovered engines' fleets.
	lifecycle *fleet.Lifecycle
}

// provisionModel registers the fleet of one model and makes its core.
func (h *Handler) provisionModel(ctx caddy.Context, app *App, m ModelConfig, budgets *budget.Limiter) (*served, error) {
	s := &served{owner: h, cfg: m, logger: h.logger, live: app.live, lifecycle: app.lifecycle}
	if len(h.Models) > 0 {
		s.logger = h.logger.With(zap.String("model", m.Model))
	}
	var handle *router.Handle
	if len(m.Endpoints) > 0 {
		spec, err := m.FleetSpec()
		if err != nil {
			return nil, err
		}
		handle = app.register(spec)
		app.setScale(spec.Key(), m.scaleConfig())
	}
	if err := s.provisionDynamic(ctx); err != nil {
		return nil, err
	}
	policy, err := loadPolicy(ctx, &s.cfg, "PolicyRaw", s.cfg.PolicyRaw)
	if err != nil {
		return nil, err
	}
	queue, err := h.provisionQueue(m)
	if err != nil {
		return nil, err
	}
	opts := router.Options{Live: app.live, Logger: s.logger, Handle: handle, Policy: policy, PolicyName: policyName(policy), SetVar: caddyhttp.SetVar, Queue: queue, Budgets: budgets}
	if s.dynamic != nil {
		opts.Discovered = s.dynamic
	}
	core := m.coreConfig()
	core.CachedTokenWeight = h.CachedTokenWeight
	if s.core, err = router.New(core, opts); err != nil {
		return nil, err
	}
	if app.cluster != nil && s.core.KeepsPrefixIndex() {
		app.cluster.pooled.sharing.ApplyPrefixes(m.Model)
	}
	if app.cluster != nil && s.core.RoutesSessions() {
		app.cluster.pooled.sharing.ApplySessions(m.Model)
	}
	if app.cluster != nil {
		app.cluster.pooled.sharing.ShareLoad(m.Model)
	}
	return s, nil
}

// coreConfig is the routing core's part of the configuration.
func (m ModelConfig) coreConfig() router.Config {
	return router.Config{
		Model:             m.Model,
		Path:              m.Path,
		EmbeddingModel:    m.EmbeddingModel,
		EmbeddingModelLib: m.EmbeddingModelLib,
		EmbeddingName:     m.EmbeddingModelName,
		Mode:              m.Mode,
		PDBalanceFactor:   m.PDBalanceFactor,
		MaxPrefillQueue:   m.MaxPrefillQueue,
		MaxInflight:       m.MaxInflight,
		Endpoints:         m.Endpoints,
		EngineKind:        engine.Kind(m.Engine.Kind),
		EngineArgs:        m.EngineArgs,
		MaxAttempts:       m.MaxAttempts,
		ToolParser:        m.ToolParser,
		RefuseMaxTokens:   m.MaxTokensPolicy == MaxTokensRefuse,
		DefaultMaxTokens:  m.DefaultMaxTokens,
		MaxTokensLimit:    m.MaxTokensLimit,
		MaxBodySize:       m.MaxBodySize,
		EngineTimeout:     time.Duration(m.EngineTimeout),
		QueueTimeout:      time.Duration(m.QueueTimeout),
		QueueSize:         m.QueueSize,
		BodyTimeout:       time.Duration(m.BodyTimeout),
		ClientTimeout:     time.Duration(m.ClientTimeout),
		PrefillRate:       m.PrefillRate,
		MaxPrefillTime:    time.Duration(m.MaxPrefillTime),
		RequestTimeout:    time.Duration(m.RequestTimeout),
		KeepAlive:         time.Duration(max(m.KeepAlive, 0)),
		SLOAdmission:      m.SLOAdmission.core(),
		PrefixCache:       m.PrefixCache,
		Sessions:          m.Sessions.core(),
	}
}

// FleetSpec is the engine fleet of an effective model (see
// EffectiveModels), as the mlc app starts it: built-in engines are this
// binary's mlc-engine subcommand.
func (m ModelConfig) FleetSpec() (engine.Spec, error) {
	spec := engine.Spec{
		Model:             m.Path,
		ModelLib:          m.ModelLib,
		EmbeddingModel:    m.EmbeddingModel,
		EmbeddingModelLib: m.EmbeddingModelLib,
		Kind:              engine.Kind(m.Engine.Kind),
		EngineArgs:        m.EngineArgs,
		PrefixCacheMode:   m.PrefixCache,
		Endpoints:         m.Endpoints,
		StartupTimeout:    time.Duration(m.StartupTimeout),
	}
	if err := m.Engine.configure(&spec); err != nil {
		return spec, err
	}
	spec = spec.Normalize()
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("mlc_router: %w", err)
	}
	if err := spec.CheckBuild(); err != nil {
		return spec, fmt.Errorf("mlc_router: %w", err)
	}
	return spec, nil
}

// logStart says what the model serves, once its engines run.
func (s *served) logStart(listen []string) {
	m := s.cfg
	roles := s.core.EffectiveRoles()
	engines := make([]string, len(m.Endpoints))
	for i, ep := range m.Endpoints {
		engines[i] = ep.Addr() + " " + roles[i]
	}
	s.logger.Info("serving the OpenAI API", zap.Strings("listen", listen), zap.String("model", m.Model),
		zap.String("mode", m.Mode), zap.Strings("engines", engines),
		zap.Duration("engine_timeout", time.Duration(m.EngineTimeout)), zap.Duration("queue_timeout", time.Duration(m.QueueTimeout)))
}
