package mlccheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/caddy-mlc/caddy-mlc/caddymlc"
	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// handler is one model of an mlc_router of the config (a handler serves
// one model, or several, each with its own engines), as the check reads
// it: its configuration as the handler takes it (inherited options and
// defaults applied), and what follows from it (roles, PEs, tokenizer,
// context).
type handler struct {
	// path is where the handler is in the JSON config.
	path string
	cfg  caddymlc.ModelConfig
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
	// (engine.Driver.ContextWindow); 0 when it does not know.
	context int
	// vocab is the model's vocabulary size, 0 when unknown.
	vocab int
}

// addr is the host:port of endpoint i.
func (h *handler) addr(i int) string { return h.cfg.Endpoints[i].Addr() }

// url is the base URL of endpoint i.
func (h *handler) url(i int) string { return h.cfg.Endpoints[i].URL() }

// disagg reports whether the router disaggregates.
func (h *handler) disagg() bool { return h.cfg.Mode == router.ModeDisagg }

// radix reports whether the engines run a prefix cache.
func (h *handler) radix() bool { return h.cfg.PrefixCache == engine.PrefixCacheRadix }

// mlc reports whether the engines serve MLC's API only (MLC's own).
func (h *handler) mlc() bool { return h.kind.Driver().Traits().Extensions == engine.ExtensionsNone }

// name says which model of which handler this is, for the report.
func (h *handler) name() string {
	if h.cfg.Path != h.cfg.Model {
		return fmt.Sprintf("%s, model %s (path %s)", h.path, h.cfg.Model, h.cfg.Path)
	}
	return fmt.Sprintf("%s, model %s", h.path, h.cfg.Model)
}

// findRouters returns every model of every mlc_router handler of a JSON
// config, in a stable order: the walk's (object keys sorted, arrays in
// order), a handler's models in its order.
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
		hs, err := newHandlers(path, obj)
		if err != nil {
			walkErr = fmt.Errorf("mlc_router at %s: %w", path, err)
			return
		}
		found = append(found, hs...)
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

// newHandlers reads one handler's JSON, one handler per model it serves.
func newHandlers(path string, obj map[string]any) ([]*handler, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var cfg caddymlc.Handler
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, err
	}
	models, err := cfg.EffectiveModels()
	if err != nil {
		return nil, err
	}
	out := make([]*handler, len(models))
	for i, m := range models {
		out[i] = newHandler(path, m)
	}
	return out, nil
}

func newHandler(path string, m caddymlc.ModelConfig) *handler {
	r := &handler{path: path, cfg: m, kind: engine.Kind(m.Engine.Kind)}
	if r.disagg() && len(m.Endpoints) > 0 {
		// EffectiveModels has checked that both roles have engines.
		r.prefill, r.decode, _ = router.SplitRoles(m.Endpoints)
	}
	gpus := make([]int, len(m.Endpoints))
	for i, ep := range m.Endpoints {
		gpus[i] = ep.GPUs
	}
	r.starts = engine.DeviceIDStarts(gpus)
	// The engines load Path: the router reads its tokenizer and context
	// from it, and the engines answer /v1/models with it.
	r.tok, r.tokErr = tokenizer.ForModel(m.Path)
	if r.tok != nil {
		r.vocab = r.tok.VocabSize()
	} else {
		r.vocab = chatConfigVocab(m.Path)
	}
	r.context = r.kind.Driver().ContextWindow(m.Path, m.EngineArgs)
	return r
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
