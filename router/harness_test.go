package router

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mlc/caddy-mlc/engine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/testnet"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// core is a routing core over a fleet of built-in engines, served by
// httptest: what the caddymlc adapter makes of a config, without Caddy.
type core struct {
	t       testing.TB
	r       *Router
	fleet   *testFleet
	base    string   // the router's URL
	engines []string // the engines' URLs
}

// startCore starts engines built-in engines of the tiny model and a
// router over them with cfg (Model, Endpoints and defaults filled in).
func startCore(t testing.TB, engines int, cfg Config, policy Policy) *core {
	t.Helper()
	return startCoreArgs(t, engines, cfg, policy)
}

// startCoreArgs is startCore with engineArgs on every engine's command
// line.
func startCoreArgs(t testing.TB, engines int, cfg Config, policy Policy, engineArgs ...string) *core {
	t.Helper()
	return startCoreModel(t, "tiny", "tiny", engines, cfg, policy, engineArgs...)
}

// startCoreModel is startCoreArgs for the model at path (a directory the
// built-in engine serves), named name. Endpoints given in cfg give the
// engines' roles, in order.
func startCoreModel(t testing.TB, name, path string, engines int, cfg Config, policy Policy, engineArgs ...string) *core {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &core{t: t}
	roles := cfg.Endpoints
	cfg.Endpoints = nil
	for i, p := range testnet.FreePorts(t, engines) {
		ep := engine.Endpoint{Host: "127.0.0.1", Port: p, GPUs: 1}
		if i < len(roles) {
			ep.Role = roles[i].Role
		}
		cfg.Endpoints = append(cfg.Endpoints, ep)
		c.engines = append(c.engines, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	// The engines keep no prefix cache unless the test asks (cfg's
	// PrefixCache): most tests check a request's own path.
	cfg.PrefixCache = cmp.Or(cfg.PrefixCache, engine.PrefixCacheDisable)
	spec := engine.Spec{Model: path, Kind: engine.KindBuiltin, Program: exe, PrefixCacheMode: cfg.PrefixCache,
		Endpoints: cfg.Endpoints, EngineArgs: engineArgs, StartupTimeout: time.Minute}.Normalize()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.fleet, err = newTestFleet(NewLive(), spec); err != nil {
		t.Fatal(err)
	}
	if err := c.fleet.launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.fleet.stop)
	cfg.Model, cfg.Path, cfg.EngineKind, cfg.EngineArgs = name, path, engine.KindBuiltin, engineArgs
	defaults(&cfg)
	handle := NewHandle(spec)
	handle.Set(c.fleet.Pool)
	if c.r, err = New(cfg, Options{Live: c.fleet.live, Handle: handle, Policy: policy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.r.Close)
	srv := httptest.NewServer(NewModels([]*Router{c.r}, 0))
	t.Cleanup(srv.Close)
	c.base = srv.URL
	return c
}

// testFleet is a fleet as router's tests run it: engine.Fleet's
// processes behind the routers' Pool, and the load polls a ready fleet
// starts. Package fleet's Fleet adds the lifecycle (autoscaler, drains,
// retirement) on top; router's tests cannot import it, which imports
// router.
type testFleet struct {
	*engine.Fleet
	*Pool
	spec engine.Spec
}

// newTestFleet makes the fleet of spec, its engines not started yet.
func newTestFleet(live *Live, spec engine.Spec) (*testFleet, error) {
	ef, err := engine.New(spec, engine.Options{Logger: zap.NewNop(), OnStateChange: func(int, engine.State, engine.State) { live.EnginesChanged() }})
	if err != nil {
		return nil, err
	}
	return &testFleet{Fleet: ef, Pool: NewPool(live, ef, spec, zap.NewNop()), spec: spec}, nil
}

// launch starts the engines and waits until they are ready; the load
// polls run until they stop.
func (f *testFleet) launch() error {
	err := f.Fleet.LaunchNow(func(ctx context.Context) {
		f.PollLoad(ctx, f.Pool)
		f.Pool.Wake()
	})
	f.Pool.Wake()
	return err
}

// stop stops the engines once nothing runs on them (what runs ends with
// its test, but its last calls may be on their way out).
func (f *testFleet) stop() {
	f.Pool.WaitIdle(30 * time.Second)
	f.Fleet.Shutdown()
}

// defaults fills what the adapter's defaults would.
func defaults(cfg *Config) {
	if cfg.Mode == "" {
		cfg.Mode = ModeDisagg
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = protocol.DefaultMaxBodyBytes
	}
	if cfg.EngineTimeout == 0 {
		cfg.EngineTimeout = DefaultEngineTimeout
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.ClientTimeout == 0 {
		cfg.ClientTimeout = DefaultClientTimeout
	}
	if cfg.MaxPrefillQueue == 0 {
		cfg.MaxPrefillQueue = DefaultMaxPrefillQueue
	}
}

// greedy is a greedy completion request of prompt.
func greedy(prompt any, maxTokens int) map[string]any {
	return map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
}

// complete posts a whole completion to url and returns its text.
func (c *core) complete(url string, body map[string]any) string {
	c.t.Helper()
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out protocol.CompletionResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
		c.t.Fatalf("%s: %d %s", url, resp.StatusCode, raw)
	}
	return out.Choices[0].Text
}

// stream posts a streamed completion to the router and returns its text
// and whether it ended with [DONE].
func (c *core) stream(body map[string]any) (text string, done bool) {
	c.t.Helper()
	return c.streamAt(c.base, body)
}

// streamAt posts a streamed completion to url.
func (c *core) streamAt(url string, body map[string]any) (text string, done bool) {
	c.t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(url+protocol.PathCompletions, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return sb.String(), true
		}
		var chunk protocol.CompletionResponse
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			c.t.Fatalf("%v: %s", err, data)
		}
		for _, ch := range chunk.Choices {
			sb.WriteString(ch.Text)
		}
	}
	return sb.String(), false
}
