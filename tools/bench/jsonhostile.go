package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/hostile"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// runHostile serves the hostile schemas (internal/testkit/hostile) on
// the engine at addr, one after another, beside a stream of plain
// completions: the time to each 400 or answer, the plain requests' time
// to first token meanwhile, and the engine's resident memory at most.
func runHostile(ctx context.Context, addr string, pid int, stdout io.Writer) error {
	base := "http://" + addr
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var ttfts []time.Duration
	var peak int64
	wg.Add(2)
	goroutine.Go(logger, "plain stream", func() { defer wg.Done(); ttfts = plainTTFTs(ctx, base) }, nil)
	goroutine.Go(logger, "engine memory", func() { defer wg.Done(); peak = peakRSS(ctx, pid) }, nil)

	fmt.Fprintln(stdout, "| hostile schema | answer | time | tokens |")
	fmt.Fprintln(stdout, "| --- | --- | ---: | ---: |")
	var failed error
	for _, h := range hostile.Schemas() {
		format := map[string]any{"type": "json_object", "schema": h.Text}
		body := map[string]any{"prompt": "Describe it as JSON.", "max_tokens": 300, "temperature": 0, "response_format": format}
		t0 := time.Now()
		status, text, tokens, err := hostileCall(ctx, base, body)
		took := time.Since(t0)
		switch {
		case err != nil:
			failed = err
		case h.Bound != "" && status != http.StatusBadRequest, h.Bound == "" && (status != http.StatusOK || !json.Valid([]byte(text))):
			failed = fmt.Errorf("%s: %d %q", h.Name, status, text)
		}
		answer := fmt.Sprintf("%d", status)
		if status == http.StatusOK {
			answer += ", valid JSON"
		}
		fmt.Fprintf(stdout, "| %s | %s | %.1f ms | %d |\n", h.Name, answer, took.Seconds()*1e3, tokens)
	}
	cancel()
	wg.Wait()
	if len(ttfts) > 0 {
		slices.Sort(ttfts)
		fmt.Fprintf(stdout, "\nMeanwhile %d plain streamed completions: time to first token median %.1f ms, most %.1f ms. The engine's resident memory: at most %d MB.\n\n",
			len(ttfts), ttfts[len(ttfts)/2].Seconds()*1e3, ttfts[len(ttfts)-1].Seconds()*1e3, peak>>20)
	}
	return failed
}

// hostileCall sends one completion and returns its status, text and
// completion tokens.
func hostileCall(ctx context.Context, base string, body map[string]any) (int, string, int, error) {
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	resp, _, err := postCompletion(ctx, http.DefaultClient, base, raw, nil)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(out), 0, err
	}
	var cr protocol.CompletionResponse
	if err := json.Unmarshal(out, &cr); err != nil || len(cr.Choices) == 0 || cr.Usage == nil {
		return resp.StatusCode, string(out), 0, fmt.Errorf("answer %s: %v", out, err)
	}
	return resp.StatusCode, cr.Choices[0].Text, cr.Usage.CompletionTokens, nil
}

// plainTTFTs streams plain completions one after another until ctx ends
// and returns their times to first token.
func plainTTFTs(ctx context.Context, base string) []time.Duration {
	var out []time.Duration
	body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "stream": true,
		"stream_options": map[string]any{"include_usage": true}})
	for ctx.Err() == nil {
		resp, t0, err := postCompletion(ctx, http.DefaultClient, base, body, nil)
		if err != nil {
			return out
		}
		first, _, _, err := streamTimes(resp.Body)
		resp.Body.Close()
		if err == nil {
			out = append(out, first.Sub(t0))
		}
	}
	return out
}

// peakRSS samples process pid's resident memory until ctx ends and
// returns the most seen.
func peakRSS(ctx context.Context, pid int) int64 {
	var peak int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := readProc(pid); err == nil {
			peak = max(peak, s.rss)
		}
		select {
		case <-ctx.Done():
			return peak
		case <-tick.C:
		}
	}
}
