package builtin

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkEngine reports the engine's prefill speed for prompts of 256
// and 1,024 tokens and its decode speed for one stream, on the tiny model,
// through its HTTP API, without the prefix cache:
//
//	go test -run XXX -bench Engine ./engine/builtin/
func BenchmarkEngine(b *testing.B) {
	for _, words := range []int{256, 1024} {
		b.Run(fmt.Sprintf("prefill-%d", words), func(b *testing.B) { benchPrefill(b, words) })
	}
	b.Run("decode", benchDecode)
}

func benchPrefill(b *testing.B, words int) {
	te := newTestEngine(b, "max_total_seq_length=8192;prefill_chunk_size=2048", false, "--prefix-cache-mode", "disable")
	prompt := strings.Repeat(" sun", words-1)
	var elapsed time.Duration
	tokens := 0
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		r := complete(b, te.client, te.url, "/v1/completions", greedy(fmt.Sprint(i%10)+prompt, 1))
		elapsed += time.Since(start)
		tokens += r.usage.PromptTokens
	}
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "prefill-tok/s")
}

func benchDecode(b *testing.B) {
	te := newTestEngine(b, "", false, "--prefix-cache-mode", "disable")
	var elapsed time.Duration
	tokens := 0
	for b.Loop() {
		start := time.Now()
		r := complete(b, te.client, te.url, "/v1/completions", with(greedy("a", 256), "debug_config", map[string]any{"ignore_eos": true}))
		elapsed += time.Since(start)
		tokens += r.usage.CompletionTokens
	}
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "decode-tok/s")
}
