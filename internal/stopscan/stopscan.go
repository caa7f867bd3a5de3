// Package stopscan finds a request's stop strings in generated text that
// arrives in pieces (a token's text in the engine, an engine's chunk in
// the router), holding back text that may still turn out to start a stop
// string.
//
// [Handler] is MLC-LLM's own stop-string handling, a port of its
// StopStrHandler: token-granular, it releases or drops whole pieces (the
// piece in which a stop string begins goes, with everything after it).
// The built-in engine uses it, so that its text is MLC's.
//
// [Scanner] is byte-granular: the text ends right before the earliest
// stop string, within a piece. The router uses it today.
//
// A Scanner keeps only what a match could still need: the held-back text
// (shorter than the longest stop string) and the last bytes of the text
// already handed out (a stop string may begin in text handed out and end
// in a later piece). The cost of a piece is therefore bounded by its own
// length and the longest stop string, never by the text so far.
package stopscan

import "strings"

// Scanner applies stop strings to a stream of text. It is not safe for
// concurrent use.
type Scanner struct {
	stops   []string
	maxLen  int
	tail    string // the end of the text handed out, at most maxLen-1 bytes
	pending string // received, held back
}

// New returns a Scanner for stops; empty stop strings are ignored.
func New(stops []string) *Scanner {
	s := &Scanner{}
	s.stops, s.maxLen = nonEmpty(stops)
	return s
}

// nonEmpty returns stops without the empty strings, which match
// everywhere and so are ignored, and the length of the longest.
func nonEmpty(stops []string) (kept []string, maxLen int) {
	for _, st := range stops {
		if st != "" {
			kept = append(kept, st)
			maxLen = max(maxLen, len(st))
		}
	}
	return kept, maxLen
}

// Push takes the next piece of text and returns what may be handed out
// now. hit reports that a stop string was found: out is the text before
// it, and the text ends there (the Scanner holds nothing afterwards).
func (s *Scanner) Push(text string) (out string, hit bool) {
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
func (s *Scanner) firstStop(w string) int {
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
func (s *Scanner) heldBack(w string) int {
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

// remember keeps the last maxLen-1 bytes of the text handed out.
func (s *Scanner) remember(delivered string) {
	if s.maxLen == 0 {
		return
	}
	s.tail += delivered
	if keep := s.maxLen - 1; len(s.tail) > keep {
		s.tail = s.tail[len(s.tail)-keep:]
	}
}

// Flush returns the held-back text, when the text ended without a stop
// string.
func (s *Scanner) Flush() string {
	out := s.pending
	s.pending = ""
	s.remember(out)
	return out
}

// Drop forgets the held-back text: the attempt that produced it failed,
// and the next attempt produces it again.
func (s *Scanner) Drop() { s.pending = "" }
