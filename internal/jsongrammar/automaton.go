package jsongrammar

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// State is a state of an Automaton: the parses still possible. States
// are interned: equal states are the same pointer while the Automaton
// keeps them.
type State struct {
	tops []*gnode
	key  string
	end  bool         // the text may end here
	next *[256]*State // transitions computed so far (nil: none)
	mask []uint64     // the token mask, once computed
}

// Dead reports whether no text continues this state.
func (s *State) Dead() bool { return len(s.tops) == 0 }

// CanEnd reports whether the text so far is a complete value.
func (s *State) CanEnd() bool { return s.end }

// Complete reports whether the value is complete and nothing may follow
// it: the generation should end.
func (s *State) Complete() bool { return len(s.tops) == 1 && s.tops[0].depth == 0 }

// Stats describes an automaton's caches.
type Stats struct {
	States    int           // interned states
	Masks     int           // token masks held
	MaskBytes int64         // their bytes
	MaskTime  time.Duration // CPU time spent computing masks
	Computed  int64         // masks computed (a state's again after a reset counts again)
	Degraded  int64         // masks past MaxMaskSteps, of one-byte tokens only
}

// Automaton walks a grammar over a vocabulary, caching transitions and
// token masks. It is safe for concurrent use.
type Automaton struct {
	g *Grammar
	v *Vocab

	mu        sync.Mutex
	gss       gss
	w         walker
	states    map[string]*State
	start     *State
	dead      *State
	maxStates int
	maxMask   int64
	stats     Stats
}

// Bounds of an automaton's caches, by default.
const (
	DefaultMaxStates    = 1 << 14
	DefaultMaxMaskBytes = 64 << 20
)

// maxNodesPerState bounds the stack nodes an automaton keeps, per state.
const maxNodesPerState = 16

// NewAutomaton returns the automaton of g over v (nil: no masks).
func NewAutomaton(g *Grammar, v *Vocab) *Automaton {
	a := &Automaton{g: g, v: v, states: map[string]*State{}, maxStates: DefaultMaxStates, maxMask: DefaultMaxMaskBytes}
	a.gss.nodes = map[string]*gnode{}
	a.w = walker{g: g, s: &a.gss, out: topSet{at: map[topKey]int{}}}
	a.dead = &State{key: "dead"}
	bottom := a.gss.intern(frame{st: 1}, 0, nil)
	a.start = a.intern([]*gnode{a.gss.intern(frame{n: g.root}, 1, []*gnode{bottom})})
	return a
}

// SetLimits bounds the interned states and the bytes of masks held; past
// either, the caches start over.
func (a *Automaton) SetLimits(maxStates int, maxMaskBytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maxStates, a.maxMask = maxStates, maxMaskBytes
}

// Grammar returns the automaton's grammar.
func (a *Automaton) Grammar() *Grammar { return a.g }

// Start returns the state before any text.
func (a *Automaton) Start() *State { return a.start }

// intern returns the state of tops, sorted (a.mu held).
func (a *Automaton) intern(tops []*gnode) *State {
	if len(tops) == 0 {
		return a.dead
	}
	var key strings.Builder
	for _, t := range tops {
		key.WriteString(strconv.FormatUint(t.id, 36))
		key.WriteByte(',')
	}
	if s, ok := a.states[key.String()]; ok {
		return s
	}
	if len(a.states) >= a.maxStates || len(a.gss.nodes) >= maxNodesPerState*a.maxStates {
		a.reset()
	}
	s := &State{tops: tops, key: key.String()}
	for _, t := range tops {
		if t.depth == 0 || t.depth == 1 && a.g.mayEnd(t.f) {
			s.end = true
		}
	}
	a.states[s.key] = s
	return s
}

// reset drops the caches: states held by callers stay valid.
func (a *Automaton) reset() {
	for _, s := range a.states {
		s.next, s.mask = nil, nil
	}
	a.states = map[string]*State{a.start.key: a.start}
	a.gss.nodes = map[string]*gnode{}
	a.stats.Masks, a.stats.MaskBytes = 0, 0
}

// step returns the state after byte c (a.mu held).
func (a *Automaton) step(s *State, c byte) *State {
	if s.next == nil {
		if len(s.tops) == 0 {
			return s
		}
		s.next = new([256]*State)
	}
	if n := s.next[c]; n != nil {
		return n
	}
	w := &a.w
	w.out.reset()
	for _, t := range s.tops {
		w.step(t, c)
	}
	n := a.intern(w.out.tops(&a.gss))
	if s.next != nil { // intern may have reset the caches
		s.next[c] = n
	}
	return n
}

// Feed returns the state after text; the dead state if text breaks the grammar.
func (a *Automaton) Feed(s *State, text string) *State {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := 0; i < len(text) && !s.Dead(); i++ {
		s = a.step(s, text[i])
	}
	return s
}

// Mask returns the tokens of the vocabulary whose bytes may follow s, a
// bit per token id. The slice is shared: do not change it. A mask whose
// walk of the vocabulary would take more than MaxMaskSteps (transitions
// weighted by the parses they step: a state of many parses at once, in
// strings that admit most tokens) admits the tokens of one byte only:
// the text stays in the grammar, byte by byte, and the work per token
// stays bounded; the decision depends on the state alone, so every
// engine makes it alike.
func (a *Automaton) Mask(s *State) []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.mask != nil {
		return s.mask
	}
	t0 := time.Now()
	m := make([]uint64, (a.v.size+63)/64)
	steps := 0
	if !a.walk(0, s, m, &steps) {
		clear(m)
		for _, e := range a.v.nodes[0].edges {
			if !a.step(s, e.b).Dead() {
				for _, id := range a.v.nodes[e.to].tokens {
					m[id>>6] |= 1 << (id & 63)
				}
			}
		}
		a.stats.Degraded++
	}
	a.stats.MaskTime += time.Since(t0)
	a.stats.Computed++
	if a.stats.MaskBytes+int64(len(m))*8 > a.maxMask {
		a.reset()
	}
	s.mask = m
	a.stats.Masks++
	a.stats.MaskBytes += int64(len(m)) * 8
	return m
}

// walk marks the tokens below trie node t that state s admits; false
// past MaxMaskSteps.
func (a *Automaton) walk(t int32, s *State, m []uint64, steps *int) bool {
	nd := &a.v.nodes[t]
	for _, e := range nd.edges {
		if *steps += len(s.tops); *steps > MaxMaskSteps {
			return false
		}
		n := a.step(s, e.b)
		if n.Dead() {
			continue
		}
		for _, id := range a.v.nodes[e.to].tokens {
			m[id>>6] |= 1 << (id & 63)
		}
		if !a.walk(e.to, n, m, steps) {
			return false
		}
	}
	return true
}

// Stats returns the automaton's cache figures.
func (a *Automaton) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.stats
	st.States = len(a.states)
	return st
}

// Allowed reports whether mask m admits token id.
func Allowed(m []uint64, id int) bool { return m[id>>6]&(1<<(id&63)) != 0 }
