package tokenizer

import (
	"path/filepath"
	"testing"
)

// BenchmarkEncodeLlama3 measures Encode on the conformance corpus with
// Llama-3's tokenizer, after one warm-up pass (so the word cache is
// warm, as in a server). It also reports the references' figures for
// the same corpus, tokenizer and warm-up: js-tokens/s and js-MB/s for
// @lenml/tokenizers, mlc-tokens/s and mlc-MB/s for
// @mlc-ai/web-tokenizers (Rust compiled to WebAssembly), both on node.
func BenchmarkEncodeLlama3(b *testing.B) { benchmarkEncode(b, "llama3") }

// BenchmarkEncodeQwen3 is BenchmarkEncodeLlama3 for Qwen3.
func BenchmarkEncodeQwen3(b *testing.B) { benchmarkEncode(b, "qwen3") }

func benchmarkEncode(b *testing.B, model string) {
	tk := loadModel(b, model)
	corpus := conformanceCorpus(corpusSize)
	size := 0
	for _, s := range corpus {
		size += len(s)
		tk.Encode(s)
	}
	dir := modelDir(b, model)
	ref := runReference(b, filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "tokenizer_config.json"), corpus, 5)
	mlc := runMLCReference(b, filepath.Join(dir, "tokenizer.json"), corpus, 5)

	tokens, rounds := 0, 0
	for b.Loop() {
		for _, s := range corpus {
			tokens += len(tk.Encode(s))
		}
		rounds++
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(tokens)/sec, "tokens/s")
	b.ReportMetric(float64(size*rounds)/sec/1e6, "MB/s")
	if ref.Bench != nil {
		b.ReportMetric(ref.Bench.TokensPerSecond, "js-tokens/s")
		b.ReportMetric(ref.Bench.MBPerSecond, "js-MB/s")
	}
	if mlc.Bench != nil {
		b.ReportMetric(mlc.Bench.TokensPerSecond, "mlc-tokens/s")
		b.ReportMetric(mlc.Bench.MBPerSecond, "mlc-MB/s")
	}
}

// BenchmarkLoadLlama3 measures Load of Llama-3's 9 MB tokenizer.json.
func BenchmarkLoadLlama3(b *testing.B) {
	dir := modelDir(b, "llama3")
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLlama3Cold is BenchmarkEncodeLlama3 with the word
// caches emptied before every pass, so that every word goes through the
// merge loop once per pass.
func BenchmarkEncodeLlama3Cold(b *testing.B) {
	tk := loadModel(b, "llama3")
	corpus := conformanceCorpus(corpusSize)
	size := 0
	for _, s := range corpus {
		size += len(s)
	}
	tokens, rounds := 0, 0
	for b.Loop() {
		b.StopTimer()
		tk.model.cache.reset()
		tk.model.rawCache.reset()
		b.StartTimer()
		for _, s := range corpus {
			tokens += len(tk.Encode(s))
		}
		rounds++
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(tokens)/sec, "tokens/s")
	b.ReportMetric(float64(size*rounds)/sec/1e6, "MB/s")
}

// reset empties the cache.
func (c *wordCache) reset() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.m = nil
		s.mu.Unlock()
	}
}
