package tiny

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// generatable returns the ids the model may sample, EOS excluded.
func generatable(t *Tokenizer) []int {
	var ids []int
	for id := 0; id < t.VocabSize(); id++ {
		if t.Generatable(id) && id != EOS {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestVocabulary(t *testing.T) {
	tok := New()
	if n := tok.VocabSize(); n < 1000 || n > 2100 {
		t.Fatalf("VocabSize = %d, want about a thousand words", n)
	}
	if got := tok.Encode(" the cat"); len(got) != 2 {
		t.Errorf("Encode(%q) = %v, want two word tokens", " the cat", got)
	}
	if tok.Generatable(BOS) || tok.Generatable(firstByte+'a') || !tok.Generatable(EOS) {
		t.Error("Generatable: want EOS only among specials and bytes")
	}
	if got := tok.Decode([]int{BOS, EOS}); got != "" {
		t.Errorf("specials decode to %q, want nothing", got)
	}
}

func TestRoundTripStrings(t *testing.T) {
	tok := New()
	for _, s := range []string{"", " ", "  the", "Hello, world!", "naïve café ☃", "\xff\xfe broken", "the\n\n the 42.", " zzz qq x"} {
		if got := tok.Decode(tok.Encode(s)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
	}
}

// TestCanonicalProperty checks Encode(Decode(ids)) == ids for random
// generated sequences, alone and after random prompt text.
func TestCanonicalProperty(t *testing.T) {
	tok := New()
	gen := generatable(tok)
	r := rand.New(rand.NewPCG(1, 2))
	prefixes := []string{"", "x", " ", "the", "hello wor", "a.", "é", "\n", " the end"}
	for i := range 2000 {
		ids := make([]int, r.IntN(40))
		for j := range ids {
			ids[j] = gen[r.IntN(len(gen))]
		}
		checkCanonical(t, tok, prefixes[i%len(prefixes)], ids)
	}
}

func checkCanonical(t *testing.T, tok *Tokenizer, prefix string, ids []int) {
	t.Helper()
	text := tok.Decode(ids)
	if got := tok.Encode(text); !slices.Equal(got, ids) && !(len(got) == 0 && len(ids) == 0) {
		t.Fatalf("Encode(Decode(%v)) = %v (text %q)", ids, got, text)
	}
	want := append(tok.Encode(prefix), ids...)
	if got := tok.Encode(prefix + text); !slices.Equal(got, want) {
		t.Fatalf("Encode(%q + %q) = %v, want %v", prefix, text, got, want)
	}
}

// FuzzRoundTrip checks that any string survives Encode then Decode.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "the cat sat.", " ünïcode", "\x00\xff", "  double  spaces "} {
		f.Add(s)
	}
	tok := New()
	f.Fuzz(func(t *testing.T, s string) {
		if got := tok.Decode(tok.Encode(s)); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	})
}

// FuzzCanonical maps fuzz bytes to generated ids and checks the canonical
// property after a fuzzed prefix.
func FuzzCanonical(f *testing.F) {
	f.Add("", []byte{0, 1, 2})
	f.Add("abc", []byte{5, 200, 13, 77})
	tok := New()
	gen := generatable(tok)
	f.Fuzz(func(t *testing.T, prefix string, b []byte) {
		ids := make([]int, 0, len(b)/2)
		for i := 0; i+1 < len(b); i += 2 {
			ids = append(ids, gen[(int(b[i])<<8|int(b[i+1]))%len(gen)])
		}
		checkCanonical(t, tok, prefix, ids)
	})
}
