package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

var fastPatterns = map[string]string{
	"llama3": llama3Pattern,
	"qwen2":  qwen2Pattern,
	"gpt2":   gpt2Pattern,
}

// checkFast compares the hand-compiled matcher with regexp2 on s.
func checkFast(t *testing.T, name, expr, s string) {
	t.Helper()
	p, err := compilePattern(&patternJSON{Regex: &expr})
	if err != nil {
		t.Fatal(err)
	}
	if p.fast == nil {
		t.Fatalf("%s: no fast matcher", name)
	}
	got, want := p.fast(nil, s), p.regexpFindAll(nil, s)
	if !slices.Equal(got, want) {
		t.Errorf("%s: split(%q)\n fast   %v\n regexp %v", name, s, got, want)
	}
}

func TestFastSplitMatchesRegexp(t *testing.T) {
	corpus := conformanceCorpus(corpusSize)
	for name, expr := range fastPatterns {
		for _, s := range corpus {
			checkFast(t, name, expr, s)
		}
	}
}

func FuzzFastSplit(f *testing.F) {
	for _, s := range conformanceCorpus(300) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The reference is a backtracking regexp engine: on long inputs of
		// the right shape it takes seconds, and the fuzzer then reports
		// its worker stalled. Short inputs reach every branch of the fast
		// matcher.
		if len(s) > 256 {
			return
		}
		if !utf8.ValidString(s) {
			s = validUTF8(s)
		}
		for name, expr := range fastPatterns {
			checkFast(t, name, expr, s)
		}
	})
}

// TestSplitPatternsByHand pins a few splits derived by hand from the
// expressions, so that the regexp2 reading of them is checked too.
func TestSplitPatternsByHand(t *testing.T) {
	tests := []struct {
		expr string
		in   string
		want []string
	}{
		{llama3Pattern, "Hello world", []string{"Hello", " world"}},
		{llama3Pattern, "  \n\n  x", []string{"  \n\n", " ", " x"}},
		{llama3Pattern, "I'M here's 'x", []string{"I", "'M", " here", "'s", " '", "x"}},
		{llama3Pattern, "12345 ١٢٣٤", []string{"123", "45", " ", "١٢٣", "٤"}},
		{qwen2Pattern, "12345", []string{"1", "2", "3", "4", "5"}},
		{llama3Pattern, "\tword ...\n\nx", []string{"\tword", " ...\n\n", "x"}},
		{llama3Pattern, "a  \u00A0b", []string{"a", "  ", "\u00A0b"}},
		{llama3Pattern, "end  ", []string{"end", "  "}},
		{llama3Pattern, "日本語テキスト", []string{"日本語テキスト"}},
		{llama3Pattern, "👍🏽👍!", []string{"👍🏽👍!"}},
		{llama3Pattern, "x\u200By", []string{"x", "\u200By"}},
		{gpt2Pattern, "Hello  world 123!!", []string{"Hello", " ", " world", " 123", "!!"}},
		{gpt2Pattern, "I'M", []string{"I", "'", "M"}},
	}
	for _, tt := range tests {
		p, err := compilePattern(&patternJSON{Regex: &tt.expr})
		if err != nil {
			t.Fatal(err)
		}
		for _, find := range []func([][2]int, string) [][2]int{p.fast, p.regexpFindAll} {
			var got []string
			for _, m := range find(nil, tt.in) {
				got = append(got, tt.in[m[0]:m[1]])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("split(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}
