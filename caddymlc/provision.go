package caddymlc

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Tokenizer turns text into the model's token ids and back; the router
// tokenizes string prompts with it (MLC's handle_completion, step 1).
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// Provision applies defaults, loads the tokenizer, and registers the
// engine fleet with the mlc app, which starts it with the config.
func (r *Router) Provision(ctx caddy.Context) error {
	*r = r.withDefaults()
	if err := r.validate(); err != nil {
		return err
	}
	r.routerState = new(routerState)
	r.logger = ctx.Logger()
	limitUnsentOnAccept(ctx)
	if err := r.loadTokenizer(); err != nil {
		return err
	}
	r.context = contextWindow(engine.Kind(r.Engine.Kind), r.Model, r.EngineArgs)
	var err error
	if r.chatTmpl, err = loadChatTemplate(r.Model); err != nil {
		r.chatErr = err
		r.logger.Warn("no chat template: /v1/chat/completions is off", zap.Error(err))
	}
	appVal, err := ctx.App("mlc")
	if err != nil {
		return fmt.Errorf("mlc_router: %w", err)
	}
	app := appVal.(*App)
	r.handle = &fleetHandle{}
	if len(r.Endpoints) > 0 {
		spec, err := r.fleetSpec()
		if err != nil {
			return err
		}
		r.handle = app.register(spec)
	}
	if err := r.provisionDynamic(ctx); err != nil {
		return err
	}
	app.adoptRouter(r)
	r.roles = roleIndexes(r.Mode, r.Endpoints)
	if err := r.provisionPolicy(ctx); err != nil {
		return err
	}
	r.client = newEngineClient(time.Duration(r.EngineTimeout))
	r.metrics = sharedMetrics()
	if err := r.metrics.register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("mlc_router: metrics: %w", err)
	}
	r.itl = r.metrics.itl.WithLabelValues(r.Mode)
	r.strategy, err = r.newStrategy()
	if err != nil {
		return err
	}
	addLive(r)
	return nil
}

// loadTokenizer loads the model's tokenizer. The built-in engine cannot
// run without one, so neither can the router; other engines may load
// models the router cannot read (an HF:// name, say): the router then
// serves token-id prompts only, and says so.
func (r *Router) loadTokenizer() error {
	tok, err := tokenizer.ForModel(r.Model)
	if err == nil {
		r.tok = tok
		return nil
	}
	if r.Engine.Kind == string(engine.KindBuiltin) {
		return fmt.Errorf("mlc_router: loading the tokenizer: %w", err)
	}
	r.tokErr = err
	r.logger.Warn("no tokenizer: only token-id prompts are served; string prompts, chat, echo and resuming a partly sent answer are off",
		zap.String("model", r.Model), zap.Error(err))
	return nil
}

// noTokenizer is the answer to a request that needs the tokenizer the
// router could not load.
func (r *Router) noTokenizer(param, what string) *protocol.Error {
	return protocol.InvalidRequest(param, "%s needs the model's tokenizer, which this router could not load (%v); send the prompt as token ids", what, r.tokErr)
}

func (r *Router) newStrategy() (strategy, error) {
	if r.Mode == ModeRoundRobin {
		return &wholeRequest{r: r}, nil
	}
	return &disagg{r: r, balance: r.PDBalanceFactor, maxPrefillQueue: r.MaxPrefillQueue}, nil
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

// target returns the router that serves a new attempt of r's requests:
// r, or, once a reload replaced r, the router of the newer config that
// took its place (its engines may be others). Attempts already running
// finish where they are: the old engines drain.
func (r *Router) target() *Router {
	t := r
	for range 16 { // a chain of quick reloads; bounded against a cycle
		if !t.handedOver() {
			return t
		}
		t = t.next.Load()
	}
	return t
}

// open runs an attempt of a request: on r's engines, or, after a reload
// replaced r, on those of the router that took its place.
func (r *Router) open(ctx context.Context, req *protocol.CompletionRequest, avoid map[string]bool) (*chunkStream, error) {
	return r.target().strategy.open(ctx, req, avoid)
}

// logStart says what the router serves, once its engines run.
func (r *Router) logStart(listen []string) {
	roles := r.effectiveRoles()
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
	removeLive(r)
	if r.client != nil {
		r.client.close()
	}
	return nil
}
