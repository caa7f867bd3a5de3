package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// caddySample is a Caddy process at one moment: what /proc says, and the
// Go runtime's own counters from the admin endpoint's /debug/vars.
type caddySample struct {
	procSample
	mallocs    uint64 // heap objects allocated so far
	allocBytes uint64 // heap bytes allocated so far
	heapInuse  uint64 // bytes in in-use heap spans
	stackInuse uint64 // bytes of goroutine stacks
}

// memStats is the part of runtime.MemStats that expvar publishes and the
// bench reads.
type memStats struct {
	Mallocs    uint64 `json:"Mallocs"`
	TotalAlloc uint64 `json:"TotalAlloc"`
	HeapInuse  uint64 `json:"HeapInuse"`
	StackInuse uint64 `json:"StackInuse"`
}

// adminClient serves the calls to Caddy's admin endpoints.
var adminClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, DisableCompression: true}}

// sample reads the Caddy's counters. The admin call allocates a little in
// Caddy itself (a few KiB, the same for every segment).
func (c *caddyProc) sample(ctx context.Context) (caddySample, error) {
	ps, err := readProc(c.pid())
	if err != nil {
		return caddySample{}, err
	}
	var vars struct {
		MemStats memStats `json:"memstats"`
	}
	body, err := c.adminGet(ctx, "/debug/vars", adminTimeout)
	if err != nil {
		return caddySample{}, err
	}
	if err := json.Unmarshal(body, &vars); err != nil {
		return caddySample{}, fmt.Errorf("%s/debug/vars: %w", c.admin, err)
	}
	m := vars.MemStats
	return caddySample{procSample: ps, mallocs: m.Mallocs, allocBytes: m.TotalAlloc, heapInuse: m.HeapInuse, stackInuse: m.StackInuse}, nil
}

// collectGarbage makes Caddy run a garbage collection, so that its heap
// figures count live memory only: the heap profile endpoint collects
// first when asked with gc=1.
func (c *caddyProc) collectGarbage(ctx context.Context) error {
	_, err := c.adminGet(ctx, "/debug/pprof/heap?gc=1", adminTimeout)
	return err
}

// adminGet fetches a path of the admin endpoint within timeout.
func (c *caddyProc) adminGet(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	return get(ctx, c.admin+path, timeout, 64<<20)
}

// get fetches url within timeout, up to limit bytes (see call).
func get(ctx context.Context, url string, timeout time.Duration, limit int64) ([]byte, error) {
	return call(ctx, http.MethodGet, url, nil, timeout, limit)
}

// call makes a request to url within timeout, with body as JSON when it
// is not nil, and reads up to limit bytes of the answer; a status other
// than 200 is an error that quotes the body's start.
func call(ctx context.Context, method, url string, body []byte, timeout time.Duration, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s: %.200s", method, url, resp.Status, bytes.TrimSpace(answer))
	}
	return answer, err
}

// goroutines counts the Caddy's goroutines, from the first line of its
// goroutine profile: "goroutine profile: total N".
func (c *caddyProc) goroutines(ctx context.Context) (int, error) {
	b, err := c.adminGet(ctx, "/debug/pprof/goroutine?debug=1", adminTimeout)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var n int
	if _, err := fmt.Sscanf(line, "goroutine profile: total %d", &n); err != nil {
		return 0, fmt.Errorf("goroutine profile: %q: %w", line, err)
	}
	return n, nil
}
