package builtin

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
	"github.com/caddy-mlc/caddy-mlc/engine/tokenizer"
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

// BenchmarkDecodeLength reports one stream's decode rate over 1,000 and
// over 8,000 generated tokens through the HTTP API (model, sampler,
// detokenizer, stop-string scanner), on the tiny model and on a model
// directory (a SentencePiece-style tokenizer.json), with and without stop
// strings, next to the rate of the model alone over the same positions:
// what the model loses as the context grows is attention, the rest of the
// gap is the engine around it.
//
//	go test -run XXX -bench DecodeLength -benchtime 1x ./engine/builtin/
func BenchmarkDecodeLength(b *testing.B) {
	stops := []string{"never said", "\n\n\n"}
	for _, n := range []int{1000, 8000} {
		b.Run(fmt.Sprintf("model-%d", n), func(b *testing.B) { benchModel(b, n) })
		b.Run(fmt.Sprintf("tiny-%d", n), func(b *testing.B) { benchStream(b, TinyModel, n, nil) })
		b.Run(fmt.Sprintf("tiny-stop-%d", n), func(b *testing.B) { benchStream(b, TinyModel, n, stops) })
		b.Run(fmt.Sprintf("spm-%d", n), func(b *testing.B) { benchStream(b, filepath.Join("testdata", "spm-mini"), n, nil) })
	}
}

// benchStream generates n tokens in one stream.
func benchStream(b *testing.B, model string, n int, stop []string) {
	te := newTestEngineModel(b, model, "", false, "--prefix-cache-mode", "disable")
	req := with(greedy("a", n), "stream", true, "debug_config", map[string]any{"ignore_eos": true})
	if stop != nil {
		req["stop"] = stop
	}
	var elapsed time.Duration
	tokens := 0
	for b.Loop() {
		start := time.Now()
		r := complete(b, te.client, te.url, "/v1/completions", with(req, "stream_options", map[string]any{"include_usage": true}))
		elapsed += time.Since(start)
		tokens += r.usage.CompletionTokens
	}
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "decode-tok/s")
}

// benchModel runs the tiny model alone over positions 0..n, with logits at
// every position, as decoding does.
func benchModel(b *testing.B, n int) {
	m, _, err := loadModel(TinyModel, true)
	if err != nil {
		b.Fatal(err)
	}
	c := m.Config()
	pool := kvcache.NewPool(pagesFor(n+1), c.Layers, c.Dim, false)
	slots := make([]int, n+1)
	for i := range slots {
		slots[i] = i
	}
	scratch, logits := m.NewScratch(), make([]float32, c.Vocab)
	var elapsed time.Duration
	tokens := 0
	for b.Loop() {
		start := time.Now()
		for pos := range n + 1 {
			m.Forward(pool.KV, slots[:pos+1], 100+pos%500, scratch, logits)
		}
		elapsed += time.Since(start)
		tokens += n
	}
	b.ReportMetric(float64(tokens)/elapsed.Seconds(), "decode-tok/s")
}

// BenchmarkDetokenize reports what turning a generation of 1,000 and of
// 8,000 tokens into text costs per token, with two stop strings that never
// match: the way the engine did it before (decode all the ids so far and
// search the whole text, per token: O(n) per token; the tiny tokenizer
// appended each token's string instead) and with output (a
// StreamDecoder and a stopscan.Scanner: O(1) per token), for the tiny
// tokenizer and a SentencePiece-style tokenizer.json.
//
//	go test -run XXX -bench Detokenize ./engine/builtin/
func BenchmarkDetokenize(b *testing.B) {
	stops := []string{"never said", "\n\n\n"}
	for _, model := range []string{TinyModel, filepath.Join("testdata", "spm-mini")} {
		tok, err := tokenizer.ForModel(model)
		if err != nil {
			b.Fatal(err)
		}
		text := strings.Repeat(" the quick brown fox jumps over the lazy dog, and then it rests.", 2000)
		ids := tok.Encode(text)[:8000]
		for _, n := range []int{1000, 8000} {
			name := fmt.Sprintf("%s-%d", filepath.Base(model), n)
			b.Run("whole-"+name, func(b *testing.B) {
				benchPerToken(b, n, func() {
					text := ""
					for i := range n {
						if ts, ok := tok.(tokenStringer); ok {
							text += ts.Token(ids[i])
						} else {
							text = tok.Decode(ids[:i+1])
						}
						for _, s := range stops {
							_ = strings.Index(text, s)
						}
					}
				})
			})
			b.Run("stream-"+name, func(b *testing.B) {
				benchPerToken(b, n, func() {
					o := newOutput(tok, tableText(tok), stops)
					for _, id := range ids[:n] {
						o.push(id, nil)
					}
				})
			})
		}
	}
}

// benchPerToken times run, which handles n tokens, and reports the cost
// per token.
func benchPerToken(b *testing.B, n int, run func()) {
	var elapsed time.Duration
	tokens := 0
	for b.Loop() {
		start := time.Now()
		run()
		elapsed += time.Since(start)
		tokens += n
	}
	b.ReportMetric(float64(elapsed.Microseconds())/float64(tokens), "µs/token")
}
