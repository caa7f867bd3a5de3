package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
)

// The post-processed token table is MLC's: bytes as the tokens stand for
// them, a leading space kept, a lone byte of a character kept raw.
func TestPostProcessedToken(t *testing.T) {
	spm, err := Load(filepath.Join("testdata", "spm"))
	if err != nil {
		t.Fatal(err)
	}
	id := func(tk *HF, tok string) int {
		t.Helper()
		n, ok := tk.TokenID(tok)
		if !ok {
			t.Fatalf("no token %q", tok)
		}
		return n
	}
	for tok, want := range map[string]string{"<0x0A>": "\n", "<0xE2>": "\xe2", "</s>": "</s>"} {
		if got := spm.PostProcessedToken(id(spm, tok)); got != want {
			t.Errorf("spm %q: %q, want %q", tok, got, want)
		}
	}
	spaced := 0
	for id := range spm.VocabSize() {
		if tok, _ := spm.IDToken(id); len(tok) > 3 && tok[:3] == "\u2581" {
			spaced++
			want := strings.ReplaceAll(tok, "\u2581", " ")
			if got := spm.PostProcessedToken(id); got != want || spm.Decode([]int{id}) != want[1:] {
				t.Errorf("spm %q: %q, want its leading space (which Decode strips)", tok, got)
			}
		}
	}
	if spaced == 0 {
		t.Fatal("no spm token starts with a space")
	}
	llama := loadModel(t, "llama3")
	for tok, want := range map[string]string{"Ġthe": " the", "Ċ": "\n", "<|eot_id|>": "<|eot_id|>", "Ã": "\xc3"} {
		if got := llama.PostProcessedToken(id(llama, tok)); got != want {
			t.Errorf("llama3 %q: %q, want %q", tok, got, want)
		}
	}
	if spm.PostProcessedToken(-1) != "" || spm.PostProcessedToken(spm.VocabSize()) != "" {
		t.Error("an id outside the vocabulary has a token")
	}
}
