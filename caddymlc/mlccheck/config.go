package mlccheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/caddy-mlc/caddy-mlc/caddymlc"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// handler is one mlc_router of the config, as the check reads it: its
// configuration with the defaults the handler applies, and what follows
// from it (roles, PEs, tokenizer, context).
type handler struct {
	// path is where the handler is in the JSON config.
	path string
	cfg  caddymlc.Router
	kind engine.Kind
	// prefill and decode are the indexes of the endpoints that may take
	// each role (disagg mode).
	prefill, decode []int
	// starts are the endpoints' first PEs, with the world's size last:
	// engine i's recv_rank is starts[i].
	starts []int
	// tok is the router's tokenizer of the model; nil when it has none
	// (tokErr says why).
	tok    tokenizer.ModelTokenizer
	tokErr error
	// context is the most tokens of a sequence the router lets through
	// (router.ContextWindow); 0 when it does not know.
	context int
	// vocab is the model's vocabulary size, 0 when unknown.
	vocab int
}

// addr is the host:port of endpoint i.
func (r *handler) addr(i int) string { return r.cfg.Endpoints[i].Addr() }

// url is the base URL of endpoint i.
func (r *handler) url(i int) string { return r.cfg.Endpoints[i].URL() }

// disagg reports whether the router disaggregates.
func (r *handler) disagg() bool { return r.cfg.Mode == router.ModeDisagg }

// radix reports whether the engines run a prefix cache.
func (r *handler) radix() bool { return r.cfg.PrefixCache == engine.PrefixCacheRadix }

// mlc reports whether the engines are MLC's own: only MLC's API is used.
func (r *handler) mlc() bool { return r.kind == engine.KindMLC }

// findRouters returns every mlc_router handler of a JSON config, in a
// stable order (the walk's: object keys sorted, arrays in order).
func findRouters(config []byte) ([]*handler, error) {
	var root any
	if err := json.Unmarshal(config, &root); err != nil {
		return nil, fmt.Errorf("config is not JSON: %w", err)
	}
	var found []*handler
	var walkErr error
	walk(root, "", func(path string, obj map[string]any) {
		if walkErr != nil || obj["handler"] != "mlc_router" {
			return
		}
		r, err := newHandler(path, obj)
		if err != nil {
			walkErr = fmt.Errorf("mlc_router at %s: %w", path, err)
			return
		}
		found = append(found, r)
	})
	return found, walkErr
}

// walk calls fn for every JSON object under v, depth first, with its path
// ("apps.http.servers.srv0.routes[0].handle[0]"). Object keys are visited
// in sorted order, so that the order of the routers is stable.
func walk(v any, path string, fn func(string, map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		fn(path, t)
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(t[k], p, fn)
		}
	case []any:
		for i, e := range t {
			walk(e, path+"["+strconv.Itoa(i)+"]", fn)
		}
	}
}

// newHandler reads one handler's JSON.
func newHandler(path string, obj map[string]any) (*handler, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var cfg caddymlc.Router
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &handler{path: path, cfg: withDefaults(cfg)}
	r.kind = engine.Kind(r.cfg.Engine.Kind)
	if r.disagg() && len(r.cfg.Endpoints) > 0 {
		// Validate has checked that both roles have engines.
		r.prefill, r.decode, _ = router.SplitRoles(r.cfg.Endpoints)
	}
	gpus := make([]int, len(r.cfg.Endpoints))
	for i, ep := range r.cfg.Endpoints {
		gpus[i] = ep.GPUs
	}
	r.starts = engine.DeviceIDStarts(gpus)
	r.tok, r.tokErr = tokenizer.ForModel(r.cfg.Model)
	if r.tok != nil {
		r.vocab = r.tok.VocabSize()
	} else {
		r.vocab = chatConfigVocab(r.cfg.Model)
	}
	r.context = router.ContextWindow(r.kind, r.cfg.Model, r.cfg.EngineArgs)
	return r, nil
}

// withDefaults applies the defaults of the mlc_router handler that the
// check depends on (see caddymlc.Router's fields).
func withDefaults(c caddymlc.Router) caddymlc.Router {
	switch c.Mode {
	case "":
		c.Mode = router.ModeDisagg
	case "round-robin", router.ModeRoundRobin:
		c.Mode = router.ModeWhole
	}
	if c.PrefixCache == "" {
		c.PrefixCache = engine.PrefixCacheDisable
	}
	if c.Engine == nil {
		c.Engine = &caddymlc.EngineProgram{Kind: string(engine.KindBuiltin)}
	}
	if len(c.Endpoints) == 0 && c.Dynamic == nil {
		c.Endpoints = []engine.Endpoint{{Host: caddymlc.DefaultHost, Port: caddymlc.DefaultPort}}
	}
	c.Endpoints = slices.Clone(c.Endpoints)
	for i := range c.Endpoints {
		if c.Endpoints[i].GPUs == 0 {
			c.Endpoints[i].GPUs = 1
		}
	}
	if c.StartupTimeout == 0 {
		c.StartupTimeout = caddymlc.DefaultStartupTimeout
	}
	return c
}

// fleetSpec is the engine fleet of a router, as the mlc app starts it.
func (r *handler) fleetSpec(program string) (engine.Spec, error) {
	spec := engine.Spec{
		Model:           r.cfg.Model,
		ModelLib:        r.cfg.ModelLib,
		Kind:            r.kind,
		EngineArgs:      r.cfg.EngineArgs,
		PrefixCacheMode: r.cfg.PrefixCache,
		Endpoints:       r.cfg.Endpoints,
		StartupTimeout:  time.Duration(r.cfg.StartupTimeout),
	}
	switch spec.Kind {
	case engine.KindBuiltin:
		spec.Program = program
	case engine.KindCommand:
		spec.Program, spec.Args = r.cfg.Engine.Command[0], r.cfg.Engine.Command[1:]
	}
	spec = spec.Normalize()
	return spec, spec.Validate()
}

// chatConfigVocab reads vocab_size from a model directory's
// mlc-chat-config.json; 0 when there is none.
func chatConfigVocab(model string) int {
	b, err := os.ReadFile(filepath.Join(model, "mlc-chat-config.json"))
	if err != nil {
		return 0
	}
	var cfg struct {
		VocabSize int `json:"vocab_size"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return 0
	}
	return max(cfg.VocabSize, 0)
}
