package builtin

import (
	"time"

	"github.com/caddy-mlc/caddy-mlc/engine/builtin/kvcache"
)

// sequence is one generated choice (or one computeOnly run) and the KV
// pages that hold its keys and values.
type sequence struct {
	req    *request
	index  int   // choice index
	tokens []int // prompt, then generated tokens
	kvLen  int   // positions whose keys and values are in pages
	pages  []int
	slots  []int // KV slot of every position the pages cover
	state  seqState

	admitted  uint64 // admission order, for choosing a preemption victim
	fresh     bool   // matched in the prefix cache, nothing computed since
	decoding  bool   // prefill done; one token per step
	generated int
	sampler   *sampler
	out       *output
	gram      *constraint // the response format's grammar; nil: text

	// The --replies script (see replies.go), chosen at the first sample:
	// scripted says a reply was chosen, and script holds its tokens still
	// to emit. A preempted sequence keeps them, and resumes where it was.
	scriptChosen bool
	scripted     bool
	script       []int

	// prep_recv state (seqPrepared).
	user      string
	matched   int       // positions shared from the prefix cache
	windowEnd int       // positions [matched, windowEnd) are to be received
	present   []bool    // received positions
	deadline  time.Time // reclaimed after this
}

// target is the number of positions whose keys and values the sequence
// must compute before it samples (or, computeOnly, finishes).
func (s *sequence) target() int { return len(s.tokens) }

// matchLimit is the most of s the prefix cache may give it: a sampling
// sequence computes its last prompt position itself, for the logits.
func (s *sequence) matchLimit() int {
	if s.req.computeOnly {
		return s.target()
	}
	return s.target() - 1
}

// addPage appends a page and its slots.
func (s *sequence) addPage(page int) {
	s.pages = append(s.pages, page)
	for off := range kvcache.PageSize {
		s.slots = append(s.slots, page*kvcache.PageSize+off)
	}
}

// setPages replaces the sequence's pages.
func (s *sequence) setPages(pages []int) {
	s.pages, s.slots = nil, nil
	for _, p := range pages {
		s.addPage(p)
	}
}

// pagesFor is the number of pages that hold n positions.
func pagesFor(n int) int { return (n + kvcache.PageSize - 1) / kvcache.PageSize }
