package caddymlc

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
	"github.com/caddy-mlc/caddy-mlc/router/budget"
)

// Provision applies defaults, registers each model's engine fleet with
// the mlc app (which starts it with the config), loads the selection
// policies and the dynamic sources, and makes each model's routing core.
func (r *Handler) Provision(ctx caddy.Context) error {
	ms, err := r.models()
	if err != nil {
		return err
	}
	r.logger = ctx.Logger()
	limitUnsentOnAccept(ctx)
	appVal, err := ctx.App("mlc")
	if err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	app := appVal.(*App)
	if err := r.provisionAuth(app); err != nil {
		return err
	}
	r.warnCredentialTenant()
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("mlc_router: metrics: %w", err)
	}
	budgets, err := r.provisionBudgets(app.cluster)
	if err != nil {
		return err
	}
	cores := make([]*router.Router, 0, len(ms))
	for _, m := range ms {
		s, err := r.provisionModel(ctx, app, m, budgets)
		if err != nil {
			return err
		}
		r.served = append(r.served, s)
		cores = append(cores, s.core)
	}
	r.front = router.NewModels(cores, defaultModel(ms))
	if err := r.provisionResponses(app.cluster); err != nil {
		return err
	}
	for _, s := range r.served {
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
	dynamic *dynamicSet
	core    *router.Router
}

// provisionModel registers the fleet of one model and makes its core.
func (r *Handler) provisionModel(ctx caddy.Context, app *App, m ModelConfig, budgets *budget.Limiter) (*served, error) {
	s := &served{owner: r, cfg: m, logger: r.logger}
	if len(r.Models) > 0 {
		s.logger = r.logger.With(zap.String("model", m.Model))
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
	queue, err := r.provisionQueue(m)
	if err != nil {
		return nil, err
	}
	opts := router.Options{Logger: s.logger, Handle: handle, Policy: policy, PolicyName: policyName(policy), SetVar: caddyhttp.SetVar, Queue: queue, Budgets: budgets}
	if s.dynamic != nil {
		opts.Discovered = s.dynamic
	}
	if s.core, err = router.New(m.coreConfig(), opts); err != nil {
		return nil, err
	}
	if app.cluster != nil && s.core.KeepsPrefixIndex() {
		app.cluster.applyPrefixes(m.Model)
	}
	if app.cluster != nil {
		app.cluster.shareLoad(m.Model)
	}
	return s, nil
}

// coreConfig is the routing core's part of the configuration.
func (r ModelConfig) coreConfig() router.Config {
	return router.Config{
		Model:             r.Model,
		Path:              r.Path,
		EmbeddingModel:    r.EmbeddingModel,
		EmbeddingModelLib: r.EmbeddingModelLib,
		EmbeddingName:     r.EmbeddingModelName,
		Mode:              r.Mode,
		PDBalanceFactor:   r.PDBalanceFactor,
		MaxPrefillQueue:   r.MaxPrefillQueue,
		MaxInflight:       r.MaxInflight,
		Endpoints:         r.Endpoints,
		EngineKind:        engine.Kind(r.Engine.Kind),
		EngineArgs:        r.EngineArgs,
		MaxAttempts:       r.MaxAttempts,
		ToolParser:        r.ToolParser,
		RefuseMaxTokens:   r.MaxTokensPolicy == MaxTokensRefuse,
		DefaultMaxTokens:  r.DefaultMaxTokens,
		MaxTokensLimit:    r.MaxTokensLimit,
		MaxBodySize:       r.MaxBodySize,
		EngineTimeout:     time.Duration(r.EngineTimeout),
		QueueTimeout:      time.Duration(r.QueueTimeout),
		QueueSize:         r.QueueSize,
		BodyTimeout:       time.Duration(r.BodyTimeout),
		ClientTimeout:     time.Duration(r.ClientTimeout),
		SLOAdmission:      r.SLOAdmission.core(),
	}
}

// FleetSpec is the engine fleet of an effective model (see
// EffectiveModels), as the mlc app starts it: built-in engines are this
// binary's mlc-engine subcommand.
func (r ModelConfig) FleetSpec() (engine.Spec, error) {
	spec := engine.Spec{
		Model:             r.Path,
		ModelLib:          r.ModelLib,
		EmbeddingModel:    r.EmbeddingModel,
		EmbeddingModelLib: r.EmbeddingModelLib,
		Kind:              engine.Kind(r.Engine.Kind),
		EngineArgs:        r.EngineArgs,
		PrefixCacheMode:   r.PrefixCache,
		Endpoints:         r.Endpoints,
		StartupTimeout:    time.Duration(r.StartupTimeout),
	}
	if err := r.Engine.configure(&spec); err != nil {
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
