package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/goroutine"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Load polling: the router's own in-flight counts do not see the work of
// other Caddy replicas, nor reservations an engine still holds, so each
// fleet asks its engines for their load (MLC's query_engine_metrics
// special request) on a short interval. The built-in engine reports
// running and waiting sequences, reservations and free KV pages, and, as
// caddy-mlc's extension, its first NVSHMEM PE (pe_start: how a discovered
// engine's recv_rank is learnt); MLC's own reports timings only.
const (
	LoadPollInterval = 100 * time.Millisecond
	loadPollTimeout  = time.Second
	maxLoadAnswer    = 1 << 20
)

// loadQuery is the body of a query_engine_metrics request.
const loadQuery = `{"prompt":[0],"max_tokens":1,"debug_config":{"special_request":"` + protocol.SpecialQueryEngineMetrics + `"}}`

// LoadRecorder hears what a fleet's engines answer its load polls: the
// routers' view of each engine.
type LoadRecorder interface {
	// LoadDue reports whether engine i is to be asked now.
	LoadDue(i int, now time.Time) bool
	// LoadAnswered records engine i's answer: its usage.extra, nil when
	// it had none.
	LoadAnswered(i int, extra map[string]json.RawMessage)
}

// PollLoad asks every ready engine of the fleet for its load, each
// LoadPollInterval that rec says it is due, until ctx is done. An engine
// that does not answer is not recorded: its last report goes stale.
func (f *Fleet) PollLoad(ctx context.Context, rec LoadRecorder) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, DisableCompression: true}}
	for i := range f.engines {
		goroutine.Every(ctx, f.logger(), "engine load poll", func() time.Duration { return LoadPollInterval }, func() {
			if f.Ready(i) && rec.LoadDue(i, time.Now()) {
				if extra, err := QueryLoad(ctx, client, f.Endpoint(i).URL()); err == nil {
					rec.LoadAnswered(i, extra)
				}
			}
		}, client.CloseIdleConnections)
	}
}

// QueryLoad asks the engine at baseURL for its load and returns the
// usage.extra of its answer (nil when it has none).
func QueryLoad(ctx context.Context, client *http.Client, baseURL string) (map[string]json.RawMessage, error) {
	return QueryMetrics(ctx, client, baseURL, loadPollTimeout)
}

// QueryMetrics asks the engine at baseURL for its metrics
// (query_engine_metrics) within timeout and returns the usage.extra of its
// answer (nil when it has none).
func QueryMetrics(ctx context.Context, client *http.Client, baseURL string, timeout time.Duration) (map[string]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+protocol.PathCompletions, strings.NewReader(loadQuery))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLoadAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("load query: status %d", resp.StatusCode)
	}
	var out protocol.CompletionResponse
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	if out.Usage == nil {
		return nil, nil
	}
	return out.Usage.Extra, nil
}
