package stopscan

import (
	"strings"
	"testing"
)

func TestScanner(t *testing.T) {
	cases := []struct {
		stops  []string
		pieces []string
		want   string
		hit    bool
	}{
		{nil, []string{"a", "b"}, "ab", false},
		{[]string{""}, []string{"a", "b"}, "ab", false},
		{[]string{"END"}, []string{"x E", "N", "D y"}, "x ", true},
		{[]string{"END"}, []string{"x E", "N", "o"}, "x ENo", false},
		{[]string{"ab", "bc"}, []string{"a", "b"}, "", true},
		{[]string{"\n\n"}, []string{"line\n", "\nmore"}, "line", true},
		{[]string{"xyz"}, []string{"xy"}, "xy", false}, // flushed at the end
		{[]string{"zz", "b c"}, []string{"a b", " c zz"}, "a ", true},
		{[]string{"é!"}, []string{"café", "!"}, "caf", true},
	}
	for _, c := range cases {
		s := New(c.stops)
		var got strings.Builder
		hit := false
		for _, p := range c.pieces {
			out, h := s.Push(p)
			got.WriteString(out)
			if h {
				hit = true
				break
			}
		}
		if !hit {
			got.WriteString(s.Flush())
		}
		if got.String() != c.want || hit != c.hit {
			t.Errorf("%q %q: got %q hit %v, want %q hit %v", c.stops, c.pieces, got.String(), hit, c.want, c.hit)
		}
	}
}

// A stop string that starts in the text of one attempt and ends in the
// next is honoured: held-back text is dropped with the failed attempt and
// produced again by the next.
func TestScannerAcrossAttempts(t *testing.T) {
	s := New([]string{"the end"})
	out1, _ := s.Push("it was the e")
	s.Drop() // preempted: "the e" was never delivered
	out2, hit := s.Push("the end of it")
	if out1 != "it was " || out2 != "" || !hit {
		t.Fatalf("got %q %q %v", out1, out2, hit)
	}
}

// A stop string that begins in text already handed out and ends in a
// later piece ends the text where the piece begins.
func TestScannerStopSpansHandedOutText(t *testing.T) {
	s := New([]string{"ab", "zzz"})
	out1, _ := s.Push("xa") // "a" may start "ab" but also not: held
	out2, hit := s.Push("b")
	if out1 != "x" || out2 != "" || !hit {
		t.Fatalf("got %q %q %v", out1, out2, hit)
	}
}

// TestScannerMatchesWholeText checks, token by token over a long text,
// that the pieces handed out are exactly the text before the first stop
// string, as one strings.Index over the whole text says.
func TestScannerMatchesWholeText(t *testing.T) {
	words := strings.Fields("the cat sat on the mat and the dog sat on the log while the end came near the end")
	var text strings.Builder
	for i := range 2000 {
		text.WriteString(" " + words[(i*7+i/3)%len(words)])
	}
	full := text.String()
	for _, stops := range [][]string{{"the end"}, {"dog sat on the log while"}, {"mat and", "zzz"}, {"never there"}} {
		want, wantHit := full, false
		for _, st := range stops {
			if i := strings.Index(full, st); i >= 0 && (!wantHit || i < len(want)) {
				want, wantHit = full[:i], true
			}
		}
		s := New(stops)
		var got strings.Builder
		hit := false
		for _, piece := range strings.SplitAfter(full, " ") {
			out, h := s.Push(piece)
			got.WriteString(out)
			if hit = h; hit {
				break
			}
		}
		if !hit {
			got.WriteString(s.Flush())
		}
		if got.String() != want || hit != wantHit {
			t.Errorf("stops %q: hit %v, %d bytes, want hit %v, %d bytes", stops, hit, got.Len(), wantHit, len(want))
		}
	}
}

// TestScannerBoundedState checks that what the Scanner keeps does not
// grow with the text: cost per piece is bounded by the longest stop
// string.
func TestScannerBoundedState(t *testing.T) {
	s := New([]string{"abcdefgh", "xyz"})
	for range 100000 {
		if _, hit := s.Push("abcdefg "); hit {
			t.Fatal("unexpected stop")
		}
		if len(s.tail) > 7 || len(s.pending) > 7 {
			t.Fatalf("state grew: tail %d pending %d bytes", len(s.tail), len(s.pending))
		}
	}
}

func BenchmarkScannerPush(b *testing.B) {
	s := New([]string{"the end", "\n\n", "STOP"})
	for b.Loop() {
		s.Push(" the")
	}
}
