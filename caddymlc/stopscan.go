package caddymlc

import "strings"

// stopScanner applies a request's stop strings to generated text across
// attempts. Engines apply them too, but an engine resumed after preemption
// sees only its own continuation; the router sees the whole text, so a stop
// string that would span the boundary is still honoured. Text that could be
// the start of a stop string is held back until the next piece decides.
type stopScanner struct {
	stops   []string
	maxLen  int
	tail    string // the end of the delivered text, at most maxLen-1 bytes
	pending string // received, not yet delivered
}

func newStopScanner(stops []string) *stopScanner {
	s := &stopScanner{}
	for _, st := range stops {
		if st == "" {
			continue
		}
		s.stops = append(s.stops, st)
		s.maxLen = max(s.maxLen, len(st))
	}
	return s
}

// push takes the next piece of text and returns what may be delivered now.
// hit reports that a stop string was found: out is the text before it, and
// generation must end.
func (s *stopScanner) push(text string) (out string, hit bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	s.pending += text
	window := s.tail + s.pending
	if at := s.firstStop(window); at >= 0 {
		out = window[len(s.tail):max(at, len(s.tail))]
		s.pending = ""
		return out, true
	}
	keep := s.heldBack(window)
	out = s.pending[:len(s.pending)-keep]
	s.pending = s.pending[len(s.pending)-keep:]
	s.remember(out)
	return out, false
}

// firstStop returns the earliest index of a stop string in w, or -1.
func (s *stopScanner) firstStop(w string) int {
	at := -1
	for _, st := range s.stops {
		if i := strings.Index(w, st); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// heldBack returns the length of the longest suffix of w, within the
// pending text, that is a proper prefix of a stop string.
func (s *stopScanner) heldBack(w string) int {
	best := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(s.pending)); n > best; n-- {
			if strings.HasSuffix(w, st[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

func (s *stopScanner) remember(delivered string) {
	if s.maxLen == 0 {
		return
	}
	s.tail += delivered
	if keep := s.maxLen - 1; len(s.tail) > keep {
		s.tail = s.tail[len(s.tail)-keep:]
	}
}

// flush returns the held-back text when generation ended without a stop
// string.
func (s *stopScanner) flush() string {
	out := s.pending
	s.pending = ""
	s.remember(out)
	return out
}

// drop forgets the held-back text (the attempt that produced it failed; the
// next attempt produces it again).
func (s *stopScanner) drop() { s.pending = "" }
