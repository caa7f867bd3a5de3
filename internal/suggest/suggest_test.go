package suggest

import "testing"

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"endpont", "endpoint", 1}, {"decod", "decode", 1}, {"same", "same", 0},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// A typo is answered with the nearest choice, in any case; a word far
// from every choice, or no choice at all, with nothing.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		word    string
		choices []string
		want    string
	}{
		{"endpont", []string{"model", "endpoint", "policy"}, ` (did you mean "endpoint"?)`},
		{"LeastLoaded", []string{"least_loaded", "round_robin"}, ` (did you mean "least_loaded"?)`},
		{"disag", []string{"disagg", "whole"}, ` (did you mean "disagg"?)`},
		{"fastest", []string{"least_loaded", "round_robin"}, ""},
		{"x", nil, ""},
		{"abcdefghijkl", []string{"abcdefgvwxyz"}, ""},
		{"abcdefghijkl", []string{"abcdefghijxy"}, ` (did you mean "abcdefghijxy"?)`},
	} {
		if got := DidYouMean(c.word, c.choices); got != c.want {
			t.Errorf("DidYouMean(%q, %q) = %q, want %q", c.word, c.choices, got, c.want)
		}
	}
}
