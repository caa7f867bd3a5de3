package caddymlc

import (
	"strings"
	"testing"
)

func TestStopScanner(t *testing.T) {
	cases := []struct {
		stops  []string
		pieces []string
		want   string
		hit    bool
	}{
		{nil, []string{"a", "b"}, "ab", false},
		{[]string{"END"}, []string{"x E", "N", "D y"}, "x ", true},
		{[]string{"END"}, []string{"x E", "N", "o"}, "x ENo", false},
		{[]string{"ab", "bc"}, []string{"a", "b"}, "", true},
		{[]string{"\n\n"}, []string{"line\n", "\nmore"}, "line", true},
		{[]string{"xyz"}, []string{"xy"}, "xy", false}, // flushed at the end
	}
	for _, c := range cases {
		s := newStopScanner(c.stops)
		var got strings.Builder
		hit := false
		for _, p := range c.pieces {
			out, h := s.push(p)
			got.WriteString(out)
			if h {
				hit = true
				break
			}
		}
		if !hit {
			got.WriteString(s.flush())
		}
		if got.String() != c.want || hit != c.hit {
			t.Errorf("%q %q: got %q hit %v, want %q hit %v", c.stops, c.pieces, got.String(), hit, c.want, c.hit)
		}
	}
}

// A stop string that starts in the text of one attempt and ends in the
// next is honoured: held-back text is dropped with the failed attempt and
// produced again by the next.
func TestStopScannerAcrossAttempts(t *testing.T) {
	s := newStopScanner([]string{"the end"})
	out1, _ := s.push("it was the e")
	s.drop() // preempted: "the e" was never delivered
	out2, hit := s.push("the end of it")
	if out1 != "it was " || out2 != "" || !hit {
		t.Fatalf("got %q %q %v", out1, out2, hit)
	}
}
