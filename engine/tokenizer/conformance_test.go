package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/npmref"
)

// corpusSize is the number of strings in the conformance corpus.
const corpusSize = 2500

var loaded sync.Map // model name -> *HF

// loadModel loads a reference package's tokenizer once per test binary.
func loadModel(tb testing.TB, model string) *HF {
	tb.Helper()
	if t, ok := loaded.Load(model); ok {
		return t.(*HF)
	}
	t, err := Load(modelDir(tb, model))
	if err != nil {
		tb.Fatal(err)
	}
	loaded.Store(model, t)
	return t
}

func TestConformance(t *testing.T) {
	corpus := conformanceCorpus(corpusSize)
	for _, model := range []string{"llama3", "qwen3"} {
		t.Run(model, func(t *testing.T) {
			tk := loadModel(t, model)
			dir := modelDir(t, model)
			ref := runReference(t, filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "tokenizer_config.json"), corpus, 3)
			if b := ref.Bench; b != nil {
				t.Logf("reference (@lenml/tokenizers %s, node) encodes the corpus at %.0f tokens/s, %.2f MB/s (%d strings, %d rounds)",
					npmref.ReferenceVersion, b.TokensPerSecond, b.MBPerSecond, len(corpus), b.Rounds)
			}
			compareWithReference(t, tk, corpus, ref)
		})
	}
}

// compareWithReference checks ids, decoding, round trips and streaming
// for every corpus string.
func compareWithReference(t *testing.T, tk *HF, corpus []string, ref *referenceResult) {
	t.Helper()
	var idMismatch, specialMismatch, decMismatch, roundTrips, refRoundTrips, streamMismatch int
	for i, s := range corpus {
		got := tk.Encode(s)
		if !slices.Equal(got, ref.IDs[i]) {
			idMismatch++
			if idMismatch <= 10 {
				t.Errorf("Encode(%q)\n got %v\nwant %v", s, got, ref.IDs[i])
			}
		}
		if sp := tk.EncodeSpecial(s, true); !slices.Equal(sp, ref.IDsSpecial[i]) {
			specialMismatch++
			if specialMismatch <= 10 {
				t.Errorf("EncodeSpecial(%q, true)\n got %v\nwant %v", s, sp, ref.IDsSpecial[i])
			}
		}
		dec := tk.Decode(ref.IDs[i])
		if dec != ref.Decoded[i] {
			decMismatch++
			if decMismatch <= 10 {
				t.Errorf("Decode(%v) = %q, reference %q", ref.IDs[i], dec, ref.Decoded[i])
			}
		}
		if ref.Decoded[i] == s {
			refRoundTrips++
			if tk.Decode(got) != s {
				t.Errorf("Decode(Encode(%q)) = %q", s, tk.Decode(got))
			} else {
				roundTrips++
			}
		}
		var sb strings.Builder
		sd := NewStreamDecoder(tk)
		for _, id := range got {
			sb.WriteString(sd.Push(id))
		}
		sb.WriteString(sd.Flush())
		if sb.String() != tk.Decode(got) {
			streamMismatch++
			if streamMismatch <= 10 {
				t.Errorf("streaming %v gave %q, Decode %q", got, sb.String(), tk.Decode(got))
			}
		}
	}
	t.Logf("%d strings: %d id mismatches, %d with special tokens added, %d decode mismatches, %d/%d round trips (where the reference round-trips), %d stream mismatches",
		len(corpus), idMismatch, specialMismatch, decMismatch, roundTrips, refRoundTrips, streamMismatch)
}

// TestConformanceMLC compares with MLC's own tokenizer (tokenizers-cpp
// as WebAssembly), which wraps the Rust implementation.
func TestConformanceMLC(t *testing.T) {
	corpus := conformanceCorpus(corpusSize)
	for _, model := range []string{"llama3", "qwen3"} {
		t.Run(model, func(t *testing.T) {
			tk := loadModel(t, model)
			ref := runMLCReference(t, filepath.Join(modelDir(t, model), "tokenizer.json"), corpus, 3)
			if b := ref.Bench; b != nil {
				t.Logf("reference (@mlc-ai/web-tokenizers %s, node, WebAssembly) encodes the corpus at %.0f tokens/s, %.2f MB/s (%d strings, %d rounds)",
					npmref.MLCVersion, b.TokensPerSecond, b.MBPerSecond, len(corpus), b.Rounds)
			}
			var idMismatch, decMismatch int
			for i, s := range corpus {
				got := tk.Encode(s)
				if !slices.Equal(got, ref.IDs[i]) {
					idMismatch++
					if idMismatch <= 10 {
						t.Errorf("Encode(%q)\n got %v\nwant %v", s, got, ref.IDs[i])
					}
				}
				if dec := tk.Decode(ref.IDs[i]); dec != ref.Decoded[i] {
					decMismatch++
					if decMismatch <= 10 {
						t.Errorf("Decode(%v) = %q, reference %q", ref.IDs[i], dec, ref.Decoded[i])
					}
				}
			}
			t.Logf("%d strings: %d id mismatches, %d decode mismatches", len(corpus), idMismatch, decMismatch)
		})
	}
}

// randomIDs returns n seeded random id sequences below vocab, biased
// towards short ones, with runs of byte tokens when byteLo < byteHi.
func randomIDs(n, vocab, byteLo, byteHi int) [][]int {
	rng := rand.New(rand.NewPCG(7, uint64(vocab)))
	out := make([][]int, n)
	for i := range out {
		ids := make([]int, 1+rng.IntN(12))
		for j := range ids {
			if byteHi > byteLo && rng.IntN(2) == 0 {
				ids[j] = byteLo + rng.IntN(byteHi-byteLo)
			} else {
				ids[j] = rng.IntN(vocab)
			}
		}
		out[i] = ids
	}
	return out
}

// TestDecodeRandomIDsMLC decodes random id sequences (partial UTF-8,
// special tokens, anything) and compares with MLC's tokenizer; it also
// checks that streaming gives the same text.
func TestDecodeRandomIDsMLC(t *testing.T) {
	models := []struct {
		name           string
		tk             func(*testing.T) *HF
		path           func(*testing.T) string
		byteLo, byteHi int
	}{
		{"llama3", func(t *testing.T) *HF { return loadModel(t, "llama3") },
			func(t *testing.T) string { return filepath.Join(modelDir(t, "llama3"), "tokenizer.json") }, 0, 256},
		{"qwen3", func(t *testing.T) *HF { return loadModel(t, "qwen3") },
			func(t *testing.T) string { return filepath.Join(modelDir(t, "qwen3"), "tokenizer.json") }, 0, 256},
		{"spm", func(t *testing.T) *HF { return loadSPM(t) }, func(t *testing.T) string { p, _ := filepath.Abs("testdata/spm/tokenizer.json"); return p }, 3, 259},
	}
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			tk := m.tk(t)
			ids := randomIDs(1500, tk.VocabSize(), m.byteLo, m.byteHi)
			ref := runMLCReferenceIDs(t, m.path(t), nil, 0, ids)
			var mismatch int
			for i, x := range ids {
				got := tk.Decode(x)
				if got != ref.DecodedIDs[i] {
					mismatch++
					if mismatch <= 10 {
						t.Errorf("Decode(%v) = %q, MLC %q", x, got, ref.DecodedIDs[i])
					}
				}
				var sb strings.Builder
				sd := NewStreamDecoder(tk)
				for _, id := range x {
					sb.WriteString(sd.Push(id))
				}
				sb.WriteString(sd.Flush())
				// Streaming can only differ where a byte-fallback run
				// turned out invalid (see StreamDecoder), and then only
				// before the last U+FFFD.
				stream := sb.String()
				if i := strings.LastIndex(got, "\uFFFD"); i >= 0 && m.name == "spm" {
					got, stream = got[i:], stream[max(0, strings.LastIndex(stream, "\uFFFD")):]
				}
				if stream != got {
					t.Errorf("streaming %v gave %q, Decode %q", x, sb.String(), tk.Decode(x))
				}
			}
			t.Logf("%d random id sequences: %d decode mismatches", len(ids), mismatch)
		})
	}
}
