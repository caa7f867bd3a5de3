package mlccheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/router"
)

// Every example config has its routers found, with the handler's defaults.
func TestExamplesHaveRouters(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		routers, err := findRouters(b)
		if err != nil || len(routers) == 0 {
			t.Errorf("%s: %d routers, %v", f, len(routers), err)
			continue
		}
		for _, r := range routers {
			if r.cfg.Mode != router.ModeDisagg && r.cfg.Mode != router.ModeWhole {
				t.Errorf("%s: mode %q", f, r.cfg.Mode)
			}
			if r.disagg() && (len(r.prefill) == 0 || len(r.decode) == 0) {
				t.Errorf("%s: disagg with prefill %v, decode %v", f, r.prefill, r.decode)
			}
			if n := len(r.cfg.Endpoints); len(r.starts) != n+1 {
				t.Errorf("%s: PE starts %v for %d endpoints", f, r.starts, n)
			}
		}
	}
}

// Routers anywhere in the config are found (a subroute's too), in a stable
// order, each named by its path; a router that is not valid is an error
// naming it.
func TestFindRouters(t *testing.T) {
	handlerJSON := func(port int, extra string) string {
		return fmt.Sprintf(`{"handler": "mlc_router", "model": "tiny"%s, "endpoints": [{"host": "127.0.0.1", "port": %d}, {"host": "127.0.0.1", "port": %d, "gpus": 2}]}`, extra, port, port+1)
	}
	cfg := fmt.Sprintf(`{"apps": {"http": {"servers": {
		"b": {"routes": [{"handle": [{"handler": "subroute", "routes": [{"handle": [%s]}]}]}]},
		"a": {"routes": [{"handle": [{"handler": "headers"}, %s]}]}}}}}`,
		handlerJSON(9001, `, "mode": "round-robin"`), handlerJSON(9003, ""))
	routers, err := findRouters([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range routers {
		paths = append(paths, r.path)
	}
	want := []string{"apps.http.servers.a.routes[0].handle[1]", "apps.http.servers.b.routes[0].handle[0].routes[0].handle[0]"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	a, b := routers[0], routers[1]
	if a.cfg.Mode != router.ModeDisagg || b.cfg.Mode != router.ModeWhole {
		t.Errorf("modes %q, %q: want the default disagg and MLC's round-robin read as whole", a.cfg.Mode, b.cfg.Mode)
	}
	if !slices.Equal(a.starts, []int{0, 1, 3}) || a.cfg.Endpoints[0].GPUs != 1 {
		t.Errorf("PE starts %v (gpus %d): want [0 1 3], a missing gpus being 1", a.starts, a.cfg.Endpoints[0].GPUs)
	}
	if a.kind != engine.KindBuiltin || a.cfg.PrefixCache != engine.PrefixCacheRadix || a.tok == nil || a.context <= 0 {
		t.Errorf("defaults: kind %s, prefix cache %s, tokenizer %v, context %d", a.kind, a.cfg.PrefixCache, a.tok != nil, a.context)
	}

	bad := strings.Replace(cfg, `"mode": "round-robin"`, `"mode": "sideways"`, 1)
	if _, err := findRouters([]byte(bad)); err == nil || !strings.Contains(err.Error(), want[1]) || !strings.Contains(err.Error(), "sideways") {
		t.Fatalf("an invalid router: %v, want an error naming %s and its mode", err, want[1])
	}
	if _, err := findRouters([]byte(`{"apps": `)); err == nil {
		t.Fatal("no error for a config that is not JSON")
	}
}

// A handler of several models is one handler per model, each with the
// options it inherits, its own engines, and the path its engines load.
func TestFindRouterModels(t *testing.T) {
	cfg := `{"handler": "mlc_router", "mode": "whole", "prefix_cache": "radix", "models": [
		{"model": "chat", "path": "tiny", "endpoints": [{"host": "127.0.0.1", "port": 9001}]},
		{"model": "tiny", "mode": "disagg", "endpoints": [{"host": "127.0.0.1", "port": 9002}, {"host": "127.0.0.1", "port": 9003}]}]}`
	hs, err := findRouters([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("%d handlers, want one per model", len(hs))
	}
	chat, tiny := hs[0], hs[1]
	if chat.cfg.Model != "chat" || chat.cfg.Path != "tiny" || chat.cfg.Mode != router.ModeWhole || !chat.radix() || chat.tok == nil {
		t.Errorf("chat: model %s path %s mode %s radix %v tokenizer %v", chat.cfg.Model, chat.cfg.Path, chat.cfg.Mode, chat.radix(), chat.tok != nil)
	}
	if tiny.cfg.Path != "tiny" || !tiny.disagg() || !slices.Equal(tiny.prefill, []int{0}) || !slices.Equal(tiny.decode, []int{1}) {
		t.Errorf("tiny: path %s mode %s prefill %v decode %v", tiny.cfg.Path, tiny.cfg.Mode, tiny.prefill, tiny.decode)
	}
	if !strings.Contains(chat.name(), "model chat (path tiny)") || !strings.Contains(tiny.name(), "model tiny") {
		t.Errorf("names %q, %q", chat.name(), tiny.name())
	}
}

// The model's vocabulary, where the router has no tokenizer, is
// mlc-chat-config.json's.
func TestChatConfigVocab(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mlc-chat-config.json"), []byte(`{"context_window_size": 4096, "vocab_size": 32000}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := chatConfigVocab(dir); v != 32000 {
		t.Errorf("vocab %d, want the config's 32000", v)
	}
	if v := chatConfigVocab(t.TempDir()); v != 0 {
		t.Errorf("vocab %d without a config, want 0", v)
	}
}

// A kv_append_metadata is read for any number of models, and refused when
// a model's segments do not hold the window or it is malformed.
func TestCheckMetadata(t *testing.T) {
	enc := func(flat ...int) string {
		b, _ := json.Marshal(flat)
		return base64Std(b)
	}
	rec := prepRecord{matched: 16, end: 40, promptLen: 41}
	for _, c := range []struct {
		meta   string
		models int
		err    string
	}{
		{enc(2, 100, 16, 300, 8), 1, ""},
		{enc(1, 0, 24, 2, 5, 12, 9, 12), 2, ""},
		{enc(1, 0, 23), 0, "slots for 23 tokens"},
		{enc(1, 0, 24, 1, 0, 20), 0, "model 1 has slots for 20"},
		{enc(3, 0, 24), 0, "bad segment count"},
		{enc(1, -5, 24), 0, "negative"},
		{"not base64!", 0, "not base64"},
		{base64Std([]byte(`{"a": 1}`)), 0, "not a JSON array"},
	} {
		rec.metadata = c.meta
		models, err := checkMetadata(rec)
		switch {
		case c.err == "" && (err != nil || models != c.models):
			t.Errorf("%s: %d models, %v; want %d", c.meta, models, err, c.models)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error with %q", c.meta, err, c.err)
		}
	}
}
