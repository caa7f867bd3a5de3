package caddymlc

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Provision applies defaults, registers the engine fleet with the mlc app
// (which starts it with the config), loads the selection policy and the
// dynamic sources, and makes the routing core.
func (r *Router) Provision(ctx caddy.Context) error {
	*r = r.withDefaults()
	if err := r.validate(); err != nil {
		return err
	}
	r.logger = ctx.Logger()
	limitUnsentOnAccept(ctx)
	appVal, err := ctx.App("mlc")
	if err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	app := appVal.(*App)
	var handle *router.Handle
	if len(r.Endpoints) > 0 {
		spec, err := r.fleetSpec()
		if err != nil {
			return err
		}
		handle = app.register(spec)
	}
	if err := r.provisionDynamic(ctx); err != nil {
		return err
	}
	policy, err := loadPolicy(ctx, r, "PolicyRaw", r.PolicyRaw)
	if err != nil {
		return err
	}
	if err := router.RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("mlc_router: metrics: %w", err)
	}
	opts := router.Options{Logger: r.logger, Handle: handle, Policy: policy, SetVar: caddyhttp.SetVar}
	if r.dynamic != nil {
		opts.Discovered = r.dynamic
	}
	if r.core, err = router.New(r.coreConfig(), opts); err != nil {
		return err
	}
	app.adoptRouter(r)
	return nil
}

// coreConfig is the routing core's part of the configuration.
func (r *Router) coreConfig() router.Config {
	return router.Config{
		Model:           r.Model,
		Mode:            r.Mode,
		PDBalanceFactor: r.PDBalanceFactor,
		MaxPrefillQueue: r.MaxPrefillQueue,
		Endpoints:       r.Endpoints,
		EngineKind:      engine.Kind(r.Engine.Kind),
		EngineArgs:      r.EngineArgs,
		MaxAttempts:     r.MaxAttempts,
		MaxBodySize:     r.MaxBodySize,
		EngineTimeout:   time.Duration(r.EngineTimeout),
		QueueTimeout:    time.Duration(r.QueueTimeout),
		QueueSize:       r.QueueSize,
		BodyTimeout:     time.Duration(r.BodyTimeout),
		ClientTimeout:   time.Duration(r.ClientTimeout),
	}
}

// fleetSpec is the engine fleet the configuration describes.
func (r *Router) fleetSpec() (engine.Spec, error) {
	spec := engine.Spec{
		Model:           r.Model,
		ModelLib:        r.ModelLib,
		Kind:            engine.Kind(r.Engine.Kind),
		EngineArgs:      r.EngineArgs,
		PrefixCacheMode: r.PrefixCache,
		Endpoints:       r.Endpoints,
		StartupTimeout:  time.Duration(r.StartupTimeout),
	}
	switch spec.Kind {
	case engine.KindBuiltin:
		exe, err := builtinProgram()
		if err != nil {
			return spec, err
		}
		spec.Program = exe
	case engine.KindCommand:
		spec.Program, spec.Args = r.Engine.Command[0], r.Engine.Command[1:]
	}
	spec = spec.Normalize()
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("mlc_router: %w", err)
	}
	return spec, nil
}

// ServeHTTP serves the OpenAI-compatible API through the routing core and
// passes every request outside it to the next handler.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request, next caddyhttp.Handler) error {
	if !router.Handles(req.URL.Path) {
		return next.ServeHTTP(w, req)
	}
	r.core.ServeHTTP(w, req)
	return nil
}

// logStart says what the router serves, once its engines run.
func (r *Router) logStart(listen []string) {
	roles := r.core.EffectiveRoles()
	engines := make([]string, len(r.Endpoints))
	for i, ep := range r.Endpoints {
		engines[i] = ep.Addr() + " " + roles[i]
	}
	r.logger.Info("serving the OpenAI API", zap.Strings("listen", listen), zap.String("model", r.Model),
		zap.String("mode", r.Mode), zap.Strings("engines", engines),
		zap.Duration("engine_timeout", time.Duration(r.EngineTimeout)), zap.Duration("queue_timeout", time.Duration(r.QueueTimeout)))
}

// Cleanup drops idle engine connections; the mlc app releases the fleet.
func (r *Router) Cleanup() error {
	if r.core != nil {
		r.core.Close()
	}
	return nil
}
