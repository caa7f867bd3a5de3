package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestVariantsAgainstReferences rewires Llama-3's tokenizer.json into
// other pipelines that released models use (GPT-2 style ByteLevel
// splitting, a BOS template, other normalizers, a split pattern with no
// hand-compiled matcher) and compares each with both references.
func TestVariantsAgainstReferences(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(modelDir(t, "llama3"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(modelDir(t, "llama3"), "tokenizer_config.json")
	corpus := conformanceCorpus(800)
	variants := []struct {
		name    string
		replace map[string]string
		// jsDiffers, if set, says why @lenml/tokenizers is known to
		// differ from the Rust implementation here, so that only MLC's
		// tokenizer is compared.
		jsDiffers string
	}{
		{"gpt2", map[string]string{
			"pre_tokenizer": `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`}, ""},
		{"gpt2-prefix-space", map[string]string{
			"pre_tokenizer": `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`}, ""},
		{"bos-template", map[string]string{
			"post_processor": `{"type":"TemplateProcessing",
				"single":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
				"pair":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"<|begin_of_text|>","type_id":1}},{"Sequence":{"id":"B","type_id":1}}],
				"special_tokens":{"<|begin_of_text|>":{"id":"<|begin_of_text|>","ids":[128000],"tokens":["<|begin_of_text|>"]}}}`}, ""},
		{"regexp2-path", map[string]string{
			// Two-digit numbers: no hand-compiled matcher for this one.
			"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
				{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,2}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},
				{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, ""},
		{"nfkc", map[string]string{"normalizer": `{"type":"NFKC"}`}, ""},
		{"nfd-strip-accents", map[string]string{"normalizer": `{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"}]}`}, ""},
		{"digits-then-bytelevel", map[string]string{
			"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
				{"type":"Digits","individual_digits":true},
				{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]}`},
			// Rust's Digits uses char::is_numeric (any \p{N}: ١٢٣, Ⅻ, ½, ²);
			// the JavaScript port uses \d, ASCII digits only.
			"@lenml/tokenizers' Digits matches ASCII digits only"},
		{"lowercase", map[string]string{"normalizer": `{"type":"Lowercase"}`},
			"JavaScript's toLowerCase applies the final-sigma rule, Rust's per-character lowercasing does not"},
		{"replace-regex-strip", map[string]string{"normalizer": `{"type":"Sequence","normalizers":[
			{"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "},{"type":"Strip","strip_left":true,"strip_right":true}]}`}, "JavaScript's \\s lacks U+0085, which Rust's includes"},
		{"split-merged-with-previous", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},
			{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, "@lenml/tokenizers' Split knows only Isolated and Removed"},
		{"split-merged-with-next", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"MergedWithNext","invert":false},
			{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, "@lenml/tokenizers' Split knows only Isolated and Removed"},
		{"split-contiguous", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Split","pattern":{"Regex":"[0-9]"},"behavior":"Contiguous","invert":false},
			{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, "@lenml/tokenizers' Split knows only Isolated and Removed"},
		{"split-removed-inverted", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Split","pattern":{"Regex":"\\p{L}+"},"behavior":"Removed","invert":true},
			{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, ""},
		{"whitespace-split", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"WhitespaceSplit"},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, "JavaScript's \\s lacks U+0085, which Rust's includes"},
		{"whitespace", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Whitespace"},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}`}, "@lenml/tokenizers' Whitespace uses ASCII-only \\w"},
		{"punctuation", map[string]string{"pre_tokenizer": `{"type":"Sequence","pretokenizers":[
			{"type":"Punctuation","behavior":"Isolated"},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]}`}, "@lenml/tokenizers' Punctuation keeps runs of punctuation together and uses another character class"},
	}
	if testing.Short() {
		t.Skip("slow: runs node twice per variant")
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var m map[string]json.RawMessage
			if err := json.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			for k, val := range v.replace {
				m[k] = json.RawMessage(val)
			}
			data, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := FromJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			js := &referenceResult{}
			if v.jsDiffers == "" {
				js = runReference(t, path, config, corpus, 0)
			}
			mlc := runMLCReference(t, path, corpus, 0)
			var jsMismatch, mlcMismatch int
			for i, s := range corpus {
				got := tk.Encode(s)
				if v.jsDiffers == "" && (!slices.Equal(got, js.IDs[i]) || !slices.Equal(tk.EncodeSpecial(s, true), js.IDsSpecial[i])) {
					jsMismatch++
					if jsMismatch <= 5 {
						t.Errorf("Encode(%q) = %v, @lenml: %v (with special tokens %v)", s, got, js.IDs[i], js.IDsSpecial[i])
					}
				}
				if dec := tk.Decode(got); !slices.Equal(got, mlc.IDs[i]) || dec != mlc.Decoded[i] {
					mlcMismatch++
					if mlcMismatch <= 5 {
						t.Errorf("Encode(%q) = %v, Decode %q; MLC: %v, %q", s, got, dec, mlc.IDs[i], mlc.Decoded[i])
					}
				}
			}
			if v.jsDiffers != "" {
				t.Logf("not compared with @lenml/tokenizers: %s", v.jsDiffers)
			}
			t.Logf("%d strings: %d mismatches with @lenml/tokenizers, %d with MLC's tokenizer", len(corpus), jsMismatch, mlcMismatch)
		})
	}
}
