package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
)

// profileRows takes a CPU profile of each chosen party's Caddy while that
// party alone serves a chosen row, and its allocation profile before and
// after; it writes them into dir with `go tool pprof -top` of each beside
// them, and returns a line per profile. This runs after the rounds, so it
// does not disturb their figures.
func profileRows(ctx context.Context, cfg *config, parties []*party) ([]string, error) {
	if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
		return nil, err
	}
	var lines []string
	for _, name := range cfg.profileRows {
		r, err := parseRow(name)
		if err != nil {
			return nil, err
		}
		for _, key := range cfg.profileParty {
			p := partyByKey(parties, key)
			if p == nil || p.caddy == nil {
				return nil, fmt.Errorf("-profile-party %s: no such Caddy", key)
			}
			line, err := profileOne(ctx, cfg, p, r)
			if err != nil {
				return nil, fmt.Errorf("profile %s %s: %w", key, name, err)
			}
			progressf("%s", line)
			lines = append(lines, line)
		}
	}
	return lines, nil
}

func profileOne(ctx context.Context, cfg *config, p *party, r row) (string, error) {
	base := filepath.Join(cfg.profileDir, p.key+"-"+r.name())
	before, err := p.caddy.adminGet(ctx, "/debug/pprof/allocs", adminTimeout)
	if err != nil {
		return "", err
	}
	type fetched struct {
		body []byte
		err  error
	}
	done := make(chan fetched, 1)
	window := time.Duration(cfg.profileSecs) * time.Second
	goroutine.Go(logger, "CPU profile fetch", func() {
		b, err := p.caddy.adminGet(ctx, "/debug/pprof/profile?seconds="+strconv.Itoa(cfg.profileSecs), window+30*time.Second)
		done <- fetched{b, err}
	}, func(v any) { done <- fetched{err: fmt.Errorf("panic: %v", v)} })
	// The load runs, a segment at a time, until the profile is back.
	requests, failed := 0, 0
	var cpu *fetched
	for round := 0; cpu == nil; round++ {
		samples, _ := p.segment(ctx, r, bodies(cfg.seed+7, r, round, cfg.requests(r), cfg.promptLen))
		for _, s := range samples {
			if s.err != nil {
				failed++
			}
		}
		requests += len(samples)
		select {
		case f := <-done:
			cpu = &f
		default:
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	if cpu.err != nil {
		return "", cpu.err
	}
	after, err := p.caddy.adminGet(ctx, "/debug/pprof/allocs", adminTimeout)
	if err != nil {
		return "", err
	}
	for suffix, b := range map[string][]byte{".cpu.pprof": cpu.body, ".allocs-before.pprof": before, ".allocs-after.pprof": after} {
		if err := os.WriteFile(base+suffix, b, 0o644); err != nil {
			return "", err
		}
	}
	tops := []string{
		pprofTop(ctx, base+".cpu.top.txt", "-top", "-nodecount=40", base+".cpu.pprof"),
		pprofTop(ctx, base+".cpu.cum.txt", "-top", "-cum", "-nodecount=60", base+".cpu.pprof"),
		pprofTop(ctx, base+".allocs.top.txt", "-top", "-nodecount=40", "-sample_index=alloc_space", "-diff_base", base+".allocs-before.pprof", base+".allocs-after.pprof"),
	}
	return fmt.Sprintf("profile of %s at %s: %s.cpu.pprof, %d requests (%d failed) in and around the %v window; %s",
		p.label, r.name(), base, requests, failed, window, strings.Join(tops, "; ")), nil
}

// pprofTop writes `go tool pprof <args>` into out, and says what it did.
func pprofTop(ctx context.Context, out string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof %s: %v", args[0], err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err.Error()
	}
	return out
}

// parseRow reads a row's name: c16-stream-64.
func parseRow(name string) (row, error) {
	f := strings.Split(name, "-")
	bad := fmt.Errorf("row %q: want c<concurrency>-stream|plain-<max_tokens>, as c16-stream-64", name)
	if len(f) != 3 || !strings.HasPrefix(f[0], "c") || (f[1] != "stream" && f[1] != "plain") {
		return row{}, bad
	}
	conc, err1 := strconv.Atoi(f[0][1:])
	mt, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || conc < 1 || mt < 1 {
		return row{}, bad
	}
	return row{conc: conc, stream: f[1] == "stream", maxTokens: mt}, nil
}

func partyByKey(parties []*party, key string) *party {
	for _, p := range parties {
		if p.key == key {
			return p
		}
	}
	return nil
}

// saveHeapProfile writes the Caddy's heap profile to base.heap.pprof and
// its in-use top beside it.
func saveHeapProfile(ctx context.Context, c *caddyProc, base string) error {
	b, err := c.adminGet(ctx, "/debug/pprof/heap", adminTimeout)
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".heap.pprof", b, 0o644); err != nil {
		return err
	}
	progressf("heap profile with the streams open: %s", pprofTop(ctx, base+".heap.top.txt", "-top", "-nodecount=40", "-sample_index=inuse_space", base+".heap.pprof"))
	return nil
}
