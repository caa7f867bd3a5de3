package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestLossyUTF8(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"abc", "abc"},
		{"\xE6\x97", "\uFFFD"},                           // truncated 3-byte sequence: one
		{"\x80\x80", "\uFFFD\uFFFD"},                     // two stray continuation bytes
		{"a\xF0\x9F\x98", "a\uFFFD"},                     // truncated 4-byte sequence
		{"\xF0\x9F\x98\x80", "😀"},                        // complete
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},           // surrogate: ED then 2 strays
		{"\xE0\x80\xAF", "\uFFFD\uFFFD\uFFFD"},           // overlong
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"\xC3", "\uFFFD"},
		{"\xC3x", "\uFFFDx"},
	}
	for _, tt := range tests {
		if got := lossyUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestByteLevelTable(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteToRune[b]
		if seen[r] {
			t.Fatalf("byte %d maps to a used code point %U", b, r)
		}
		seen[r] = true
		if runeToByte[r] != byte(b) {
			t.Fatalf("round trip of byte %d fails", b)
		}
	}
	if byteToRune[' '] != 'Ġ' || byteToRune['\n'] != 'Ċ' || byteToRune['A'] != 'A' {
		t.Errorf("space, newline, A map to %q %q %q", byteToRune[' '], byteToRune['\n'], byteToRune['A'])
	}
}

func TestSplitBehaviors(t *testing.T) {
	dash := &pattern{literal: "-"}
	tests := []struct {
		b      behavior
		invert bool
		want   []string
	}{
		{removed, false, []string{"a", "b", "c"}},
		{isolated, false, []string{"a", "-", "b", "-", "-", "c", "-"}},
		{mergedWithPrevious, false, []string{"a-", "b-", "-", "c-"}},
		{mergedWithNext, false, []string{"a", "-b", "-", "-c", "-"}},
		{contiguous, false, []string{"a", "-", "b", "--", "c", "-"}},
		{removed, true, []string{"-", "-", "-", "-"}},
	}
	in := "a-b--c-"
	for _, tt := range tests {
		sp := &splitter{find: dash.findAll, behavior: tt.b, invert: tt.invert}
		var got []string
		for _, p := range sp.split(new(scratch), nil, piece{text: in}) {
			got = append(got, p.text)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("behavior %d invert %v: split(%q) = %q, want %q", tt.b, tt.invert, in, got, tt.want)
		}
	}
}

// addedVariant is the hand-made tokenizer with extra added tokens.
func addedVariant(t *testing.T, extra ...map[string]any) *HF {
	t.Helper()
	var added []any
	for i, c := range []string{"<unk>", "<s>", "</s>"} {
		added = append(added, map[string]any{"id": i, "content": c, "special": true, "normalized": false})
	}
	for _, e := range extra {
		added = append(added, e)
	}
	tk, err := FromJSON(spmVariant(t, map[string]any{"added_tokens": added}))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestAddedTokenFlags(t *testing.T) {
	mask := func(lstrip, rstrip bool) map[string]any {
		return map[string]any{"id": 300, "content": "<mask>", "special": true, "normalized": false, "lstrip": lstrip, "rstrip": rstrip}
	}
	tests := []struct {
		name string
		tok  map[string]any
		in   string
		want []int
	}{
		// "hello ", "<mask>", " world": "▁hello▁" and "▁▁world", where
		// ▁+w (rank 6) wins over ▁+▁ (rank 10).
		{"plain", mask(false, false), "hello <mask> world", []int{spmHello, spmSpace, 300, spmSpace, spmWorld}},
		{"lstrip", mask(true, false), "hello <mask> world", []int{spmHello, 300, spmSpace, spmWorld}},
		{"rstrip", mask(false, true), "hello <mask> world", []int{spmHello, spmSpace, 300, spmWorld}},
		{"both", mask(true, true), "hello  <mask>  world", []int{spmHello, 300, spmWorld}},
		{"single_word hit", map[string]any{"id": 300, "content": "ab", "normalized": false, "single_word": true}, "ab c", []int{300, spmSpSp, spmC}},
		{"single_word miss", map[string]any{"id": 300, "content": "ab", "normalized": false, "single_word": true}, "abc", []int{spmSpace, spmAB, spmC}},
		// A normalized added token is matched in normalized text, and
		// its content is normalized too: "ab" becomes "▁ab".
		{"normalized", map[string]any{"id": 300, "content": "ab", "normalized": true}, "c ab", []int{spmSpace, spmC, 300}},
		{"normalized inside word", map[string]any{"id": 300, "content": "ab", "normalized": true}, "cab", []int{spmSpace, spmC, spmAB}},
		// Longest match wins among tokens starting at the same place.
		{"longest", map[string]any{"id": 300, "content": "<s><s>", "special": true, "normalized": false}, "<s><s><s>", []int{300, 1}},
	}
	for _, tt := range tests {
		tk := addedVariant(t, tt.tok)
		if got := tk.Encode(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestStreamDecoderHoldsPartialCharacters(t *testing.T) {
	tk := loadSPM(t)
	sd := NewStreamDecoder(tk)
	// 日 is <0xE6> <0x97> <0xA5>.
	var outs []string
	for _, id := range []int{spmHello, spmByte(0xE6), spmByte(0x97), spmByte(0xA5), spmWorld} {
		outs = append(outs, sd.Push(id))
	}
	want := []string{"hello", "", "", "日", " world"}
	if !slices.Equal(outs, want) {
		t.Errorf("Push outputs %q, want %q", outs, want)
	}
	if f := sd.Flush(); f != "" {
		t.Errorf("Flush() = %q, want empty", f)
	}
	// An incomplete character at the end comes out of Flush.
	sd.Push(spmHello)
	if got := sd.Push(spmByte(0xE6)); got != "" {
		t.Errorf("Push(<0xE6>) = %q, want nothing", got)
	}
	if got := sd.Flush(); got != "\uFFFD" {
		t.Errorf("Flush() = %q, want U+FFFD", got)
	}

	// A byte run that turns invalid after a valid byte: Decode makes
	// the whole run U+FFFD, but "-" was already returned; streaming
	// goes on with the rest and does not stall.
	ids := []int{spmByte('-'), spmByte(0xC8), spmHello, spmWorld}
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(sd.Push(id))
	}
	sb.WriteString(sd.Flush())
	if got, want := sb.String(), "-\uFFFD hello world"; got != want {
		t.Errorf("streaming %v = %q, want %q", ids, got, want)
	}
	if got, want := tk.Decode(ids), "\uFFFD\uFFFD hello world"; got != want {
		t.Errorf("Decode(%v) = %q, want %q", ids, got, want)
	}
}

func TestStreamDecoderNeverSplitsCharacters(t *testing.T) {
	for _, model := range []string{"llama3", "qwen3"} {
		t.Run(model, func(t *testing.T) {
			tk := loadModel(t, model)
			for _, s := range conformanceCorpus(600) {
				if strings.ContainsRune(s, utf8.RuneError) {
					continue
				}
				sd := NewStreamDecoder(tk)
				for _, id := range tk.Encode(s) {
					if out := sd.Push(id); strings.ContainsRune(out, utf8.RuneError) {
						t.Fatalf("%q: Push(%d) emitted %q", s, id, out)
					}
				}
			}
		})
	}
}

func TestConcurrentEncode(t *testing.T) {
	tk := loadModel(t, "llama3")
	corpus := conformanceCorpus(400)
	want := make([][]int, len(corpus))
	for i, s := range corpus {
		want[i] = tk.Encode(s)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range corpus {
				j := (i*7 + g*101) % len(corpus)
				if got := tk.Encode(corpus[j]); !slices.Equal(got, want[j]) {
					t.Errorf("concurrent Encode(%q) = %v, want %v", corpus[j], got, want[j])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestLlama3API(t *testing.T) {
	tk := loadModel(t, "llama3")
	if id, ok := tk.TokenID("<|begin_of_text|>"); !ok || id != 128000 {
		t.Errorf("TokenID(<|begin_of_text|>) = %d, %v", id, ok)
	}
	if id, ok := tk.TokenID("Ġthe"); !ok || id != 279 {
		t.Errorf("TokenID(Ġthe) = %d, %v", id, ok)
	}
	if _, ok := tk.TokenID("no such token"); ok {
		t.Error("TokenID found a token that does not exist")
	}
	if id, ok := tk.BOSTokenID(); !ok || id != 128000 {
		t.Errorf("BOSTokenID() = %d, %v", id, ok)
	}
	if got := tk.EOSTokenIDs(); !slices.Equal(got, []int{128001}) {
		t.Errorf("EOSTokenIDs() = %v", got)
	}
	if n := tk.VocabSize(); n != 128256 {
		t.Errorf("VocabSize() = %d", n)
	}
	if !tk.IsSpecial(128000) || tk.IsSpecial(279) {
		t.Error("IsSpecial is wrong")
	}
	// This package's Llama-3 tokenizer.json has a ByteLevel
	// post-processor, which adds nothing.
	if got, want := tk.EncodeSpecial("hi", true), tk.Encode("hi"); !slices.Equal(got, want) {
		t.Errorf("EncodeSpecial(hi, true) = %v, want %v", got, want)
	}
	// Invalid UTF-8 reads as one U+FFFD per byte.
	if got, want := tk.Encode("a\xff\xfeb"), tk.Encode("a\uFFFD\uFFFDb"); !slices.Equal(got, want) {
		t.Errorf("Encode(invalid) = %v, want %v", got, want)
	}
}

func TestTemplateProcessing(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(modelDir(t, "llama3"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	// The post-processor of Meta's current Llama-3 tokenizer.json.
	m["post_processor"] = json.RawMessage(`{"type":"Sequence","processors":[
		{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},
		{"type":"TemplateProcessing",
		 "single":[{"SpecialToken":{"id":"<|begin_of_text|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
		 "pair":[],
		 "special_tokens":{"<|begin_of_text|>":{"id":"<|begin_of_text|>","ids":[128000],"tokens":["<|begin_of_text|>"]}}}]}`)
	data, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tk2, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tk2.EncodeSpecial("Hello", true), []int{128000, 9906}; !slices.Equal(got, want) {
		t.Errorf("EncodeSpecial(Hello, true) = %v, want %v", got, want)
	}
	if got, want := tk2.Encode("Hello"), []int{9906}; !slices.Equal(got, want) {
		t.Errorf("Encode(Hello) = %v, want %v", got, want)
	}
}

func TestUnsupported(t *testing.T) {
	for _, c := range []map[string]any{
		{"normalizer": map[string]any{"type": "Precompiled"}},
		{"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"}},
		{"decoder": map[string]any{"type": "CTC"}},
		{"model": map[string]any{"type": "Unigram", "vocab": []any{}}},
	} {
		_, err := FromJSON(spmVariant(t, c))
		if !errors.Is(err, errUnsupported) {
			t.Errorf("FromJSON with %v: err = %v, want errUnsupported", c, err)
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
}

func TestLoadGenerationConfig(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "spm", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": [2, 0], "bos_token_id": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.EOSTokenIDs(); !slices.Equal(got, []int{2, 0}) {
		t.Errorf("EOSTokenIDs() = %v, want [2 0]", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": "<nope>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load accepted an eos_token that is not a token")
	}
}

func TestJSONScanner(t *testing.T) {
	vocab := `{"a": 0, "\"q\"": 1, "\u00e9\ud83d\ude00": 2, "back\\slash": 3 , "Ġ" :4}`
	got, err := scanVocab([]byte(vocab))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]int
	if err := json.Unmarshal([]byte(vocab), &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scanVocab = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("scanVocab[%q] = %d, want %d", k, got[k], v)
		}
	}
	for _, in := range []string{`["a b", "c\" d"]`, `[["a", "b"], ["c\"", "d e"]]`, `[]`} {
		m, err := scanMerges([]byte(in))
		if err != nil {
			t.Fatalf("scanMerges(%s): %v", in, err)
		}
		slow, err := parseMergesSlow(json.RawMessage(in))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m, slow) {
			t.Errorf("scanMerges(%s) = %q, want %q", in, m, slow)
		}
	}
	for _, bad := range []string{`{"a": 1.5}`, `{"a": "b"}`, `[1]`} {
		if _, err := scanVocab([]byte(bad)); err == nil && bad[0] == '{' {
			t.Errorf("scanVocab(%s) succeeded", bad)
		}
		if _, err := scanMerges([]byte(bad)); err == nil && bad[0] == '[' {
			t.Errorf("scanMerges(%s) succeeded", bad)
		}
	}
}

// FuzzRoundTrip checks that Llama-3's tokenizer (byte-level, no
// normalizer) gives back any valid text, also when streaming.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range conformanceCorpus(200) {
		f.Add(s)
	}
	tk := loadModel(f, "llama3")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			s = validUTF8(s)
		}
		ids := tk.Encode(s)
		if got := tk.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		var sb strings.Builder
		sd := NewStreamDecoder(tk)
		for _, id := range ids {
			sb.WriteString(sd.Push(id))
		}
		sb.WriteString(sd.Flush())
		if sb.String() != s {
			t.Fatalf("streaming Encode(%q) gave %q", s, sb.String())
		}
	})
}
