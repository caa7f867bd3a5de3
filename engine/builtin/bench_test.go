package builtin

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkEngine reports the engine's prefill and decode speed on the
// tiny model, one request at a time, through its HTTP API:
//
//	go test -run XXX -bench Engine ./engine/builtin/
func BenchmarkEngine(b *testing.B) {
	te := newTestEngine(b, "max_total_seq_length=8192;prefill_chunk_size=2048", false, "--prefix-cache-mode", "disable")
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 100) // 1,000 tokens
	var prefill, decode time.Duration
	var prefillTokens, decodeTokens int
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		r := complete(b, te.client, te.url, "/v1/completions", greedy(prompt+strings.Repeat(" sun", i%7), 1))
		prefill += time.Since(start)
		prefillTokens += r.usage.PromptTokens
		start = time.Now()
		r = complete(b, te.client, te.url, "/v1/completions", with(greedy("a", 256), "debug_config", map[string]any{"ignore_eos": true}))
		decode += time.Since(start)
		decodeTokens += r.usage.CompletionTokens
	}
	b.ReportMetric(float64(prefillTokens)/prefill.Seconds(), "prefill-tok/s")
	b.ReportMetric(float64(decodeTokens)/decode.Seconds(), "decode-tok/s")
}
