package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/hostile"
	"github.com/caddy-mlc/caddy-mlc/internal/testkit/schematest"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// Generous bounds for a loaded 2-core CI machine under -race; the
// figures measured on a quiet one are in docs/structured-output.md.
const (
	hostileRefusalLimit = 3 * time.Second
	hostileTTFTLimit    = 10 * time.Second
	hostileEngineMemory = 1 << 30
)

// TestHostileSchemas: the schemas that froze an engine or stalled the
// router, and more of each kind, beside a steady stream of plain
// requests: a schema past a bound is a 400 from the router, fast, naming
// the bound; the others are served, their answers complete and valid;
// the plain requests keep their time to first token, and the engine its
// memory.
func TestHostileSchemas(t *testing.T) {
	c := startCore(t, 1, Config{Mode: ModeWhole}, nil)
	stop := make(chan struct{})
	var ttfts []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ttfts = append(ttfts, chatTTFT(t, c.base, fmt.Sprintf("tell me about the number %d", i)))
		}
	})

	format := func(schema string) map[string]any {
		return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(schema)}}
	}
	for _, h := range hostile.Schemas() {
		body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "describe it"}}, "max_tokens": 300, "response_format": format(h.Text)}
		t0 := time.Now()
		status, raw := callJSON(t, http.MethodPost, c.base+protocol.PathChatCompletions, body)
		took := time.Since(t0)
		if h.Bound != "" {
			if status != http.StatusBadRequest || !strings.Contains(string(raw), h.Bound) {
				t.Errorf("%s: %d %s, want a 400 naming %s", h.Name, status, raw, h.Bound)
			}
			t.Logf("%s: %d after %v", h.Name, status, took)
			if took > hostileRefusalLimit {
				t.Errorf("%s: refused after %v", h.Name, took)
			}
			continue
		}
		var out protocol.ChatCompletionResponse
		if status != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %d %s", h.Name, status, raw)
		}
		ch := out.Choices[0]
		if deref(ch.FinishReason) != protocol.FinishStop {
			t.Errorf("%s: finish %s, text %q", h.Name, deref(ch.FinishReason), ch.Message.Content)
		}
		schematest.Check(t, "the answer", ch.Message.Content, h.Text)
		t.Logf("%s: served in %v: %s", h.Name, took, ch.Message.Content)
	}
	close(stop)
	wg.Wait()

	if len(ttfts) == 0 {
		t.Fatal("no plain request was served")
	}
	slices.Sort(ttfts)
	t.Logf("%d plain requests meanwhile: time to first token median %v, most %v", len(ttfts), ttfts[len(ttfts)/2], ttfts[len(ttfts)-1])
	if most := ttfts[len(ttfts)-1]; most > hostileTTFTLimit {
		t.Errorf("a plain request waited %v for its first token", most)
	}
	if hwm := peakMemory(t, c.fleet.PID(0)); hwm > hostileEngineMemory {
		t.Errorf("the engine's memory peaked at %d MB", hwm>>20)
	}
}

// chatTTFT streams a chat answer to prompt and returns the time to its
// first chunk of text.
func chatTTFT(t *testing.T, base, prompt string) time.Duration {
	body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": prompt}}, "max_tokens": 8, "stream": true, "temperature": 0})
	t0 := time.Now()
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(base+protocol.PathChatCompletions, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return time.Hour
	}
	defer resp.Body.Close()
	first := time.Duration(0)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk protocol.ChatCompletionChunk
		if first == 0 && json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Choices) > 0 && deref(chunk.Choices[0].Delta.Content) != "" {
			first = time.Since(t0)
		}
	}
	if resp.StatusCode != http.StatusOK || first == 0 {
		t.Errorf("a plain request: status %d, no text", resp.StatusCode)
		return time.Hour
	}
	return first
}

// peakMemory is the peak resident memory of process pid (VmHWM), in bytes.
func peakMemory(t *testing.T, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
