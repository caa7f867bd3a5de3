package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/caddy-mlc/caddy-mlc/engine"
)

// bench holds what the run started: the caddy binary, the work directory
// for configs and logs, and the children.
type bench struct {
	caddyBin string
	work     string
	procs    procs
	// prefixCache is the engines' --prefix-cache-mode; "": disable.
	prefixCache string
	// engineArgs are more flags of the engines (--overrides ...).
	engineArgs []string
}

// buildCaddy builds the caddy binary of this checkout into the work
// directory, with the toolchain that runs the bench.
func (b *bench) buildCaddy(ctx context.Context) error {
	out := filepath.Join(b.work, "caddy")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/caddy-mlc/caddy-mlc/xcaddy")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./xcaddy: %w", err)
	}
	b.caddyBin = out
	return nil
}

// startEngines starts n built-in engines in one NVSHMEM world, as the
// fleet would (the same uid, npes n, each its pe_start, and where every PE
// lives), and returns their host:port addresses. The prefix cache is off:
// every party sends the same prompts, and a cache warmed by one party
// would flatter the next.
func (b *bench) startEngines(ctx context.Context, n int) ([]string, error) {
	return b.startEnginesModel(ctx, n, "tiny")
}

// startEnginesModel is startEngines for another model.
func (b *bench) startEnginesModel(ctx context.Context, n int, model string) ([]string, error) {
	addrs, _, err := b.startEngineSet(ctx, engineSet{n: n, model: model, world: true})
	return addrs, err
}

// engineSet is a run's engines: how many, of which model, whether in one
// NVSHMEM world (where a preempted request ends, for the router to
// resume), and more flags for engine i (nil: none) after the bench's.
type engineSet struct {
	n     int
	model string
	world bool
	args  func(i int) []string
	logs  string // the start of its logs' names in the work directory
}

// startEngineSet starts the engines of s and returns their addresses and
// processes once every one answers.
func (b *bench) startEngineSet(ctx context.Context, s engineSet) ([]string, []*proc, error) {
	ports, err := freePorts(s.n)
	if err != nil {
		return nil, nil, err
	}
	spec := engine.Spec{Kind: engine.KindBuiltin, Model: s.model}
	for _, p := range ports {
		spec.Endpoints = append(spec.Endpoints, engine.Endpoint{Host: "127.0.0.1", Port: p, GPUs: 1})
	}
	uid, err := engine.RandomUID{}.UID(ctx)
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]string, s.n)
	started := make([]*proc, s.n)
	for i, ep := range spec.Endpoints {
		var env []string
		if s.world {
			if env, err = spec.Env(i, uid); err != nil {
				return nil, nil, err
			}
		}
		name := fmt.Sprintf("engine %d (%s)", i, ep.Addr())
		args := append([]string{"mlc-engine", s.model, "--enable-debug", "--mode", "server", "--prefix-cache-mode", cmp.Or(b.prefixCache, "disable"),
			"--host", ep.Host, "--port", strconv.Itoa(ep.Port)}, b.engineArgs...)
		if s.args != nil {
			args = append(args, s.args(i)...)
		}
		started[i], err = b.procs.start(name, filepath.Join(b.work, fmt.Sprintf("%sengine%d.log", s.logs, i)), env, b.caddyBin, args...)
		if err != nil {
			return nil, nil, err
		}
		addrs[i] = ep.Addr()
	}
	for i, p := range started {
		if err := p.waitReady(ctx, "http://"+addrs[i]+"/v1/models"); err != nil {
			return nil, nil, err
		}
	}
	return addrs, started, nil
}

// caddyProc is a running Caddy: its site and its admin endpoint.
type caddyProc struct {
	*proc
	base  string // http://127.0.0.1:port
	admin string // http://127.0.0.1:adminport
}

// startCaddy writes a Caddyfile with handler on a site of its own and
// runs Caddy on it, ready once GET /v1/models answers through it.
func (b *bench) startCaddy(ctx context.Context, name, handler string, h2c bool) (*caddyProc, error) {
	return b.startCaddyWith(ctx, name, "", handler, h2c)
}

// startCaddyWith is startCaddy with more global options.
func (b *bench) startCaddyWith(ctx context.Context, name, global, handler string, h2c bool) (*caddyProc, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "Caddyfile")
	text := caddyfileWith(ports[0], ports[1], filepath.Join(dir, "data"), h2c, global, handler)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return nil, err
	}
	env := []string{"XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
	p, err := b.procs.start("caddy "+name, filepath.Join(dir, "caddy.log"), env, b.caddyBin,
		"run", "--config", file, "--adapter", "caddyfile")
	if err != nil {
		return nil, err
	}
	c := &caddyProc{proc: p, base: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), admin: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	if err := p.waitReady(ctx, c.base+"/v1/models"); err != nil {
		return nil, err
	}
	return c, nil
}
