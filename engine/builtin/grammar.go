package builtin

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/jsongrammar"
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// maxGrammars bounds the compiled grammars the engine keeps, each with
// its automaton's caches (bounded themselves: jsongrammar's defaults).
const maxGrammars = 32

// grammars compiles response formats and keeps their automata over the
// engine's vocabulary, the most recently used first. It is safe for
// concurrent use: handlers compile, the scheduler walks.
type grammars struct {
	tok   Tokenizer
	vocab int
	allow []bool

	mu      sync.Mutex
	v       *jsongrammar.Vocab
	extra   []bool // ids the model samples only under a grammar (see buildVocab)
	extras  bool   // there are some
	text    []string
	eosMask []uint64
	lru     []*jsongrammar.Automaton
	compile time.Duration
	evicted jsongrammar.Stats // what evicted automata held and spent, for the totals
	pairs   map[[2]int]bool   // canonical pairs of tokens (see canonical)
}

func newGrammars(tok Tokenizer, vocab int, allowed []bool, eos map[int]bool) *grammars {
	g := &grammars{tok: tok, vocab: vocab, allow: allowed, pairs: map[[2]int]bool{}}
	g.eosMask = make([]uint64, (vocab+63)/64)
	for id := range eos {
		if id >= 0 && id < vocab {
			g.eosMask[id>>6] |= 1 << (id & 63)
		}
	}
	return g
}

// buildVocab builds the byte trie of the tokens a grammar may admit (mu
// held): the ids the model samples, and, of a tokenizer that restricts
// them (the tiny one, to stay canonical), the byte tokens of printable
// ASCII that encode as themselves: JSON needs '{' or letters that the
// restricted vocabulary spells only as bytes. EOS is left out: it is
// admitted where the value may end.
func (g *grammars) buildVocab() {
	if g.v != nil {
		return
	}
	text := tableText(g.tok)
	g.text = make([]string, g.vocab)
	g.extra = make([]bool, g.vocab)
	toks := make([]string, g.vocab)
	_, restricted := g.tok.(generatable)
	for id := range g.vocab {
		if g.eosMask[id>>6]&(1<<(id&63)) != 0 {
			continue
		}
		t := text(id)
		g.text[id] = t
		switch {
		case g.allow[id]:
			toks[id] = t
		case restricted && len(t) == 1 && t[0] > ' ' && t[0] < 0x7f && slices.Equal(g.tok.Encode(t), []int{id}):
			toks[id], g.extra[id], g.extras = t, true, true
		}
	}
	g.v = jsongrammar.NewVocab(toks)
}

// automaton returns the automaton of format f (as protocol's Engine
// writes it), compiling it at its first use. param names f in errors.
func (g *grammars) automaton(f *protocol.ResponseFormat, param string) (*jsongrammar.Automaton, *protocol.Error) {
	var src []byte
	key := "json_object"
	if f.Schema != nil {
		src = []byte(*f.Schema)
		key = "schema:" + *f.Schema
	}
	bounds := jsongrammar.BuiltinBounds()
	key = jsongrammar.BoundedKey(key, bounds)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, a := range g.lru {
		if a.Grammar().Key == key {
			copy(g.lru[1:i+1], g.lru[:i])
			g.lru[0] = a
			return a, nil
		}
	}
	t0 := time.Now()
	gr := jsongrammar.JSONObject(bounds)
	if src != nil {
		var err error
		if gr, err = jsongrammar.CompileSchema(src, bounds); err != nil {
			code := protocol.CodeInvalidValue
			var se *jsongrammar.SchemaError
			if errors.As(err, &se) && se.Keyword != "" {
				code = protocol.CodeUnsupportedValue
			}
			return nil, protocol.InvalidRequest(param+".schema", "%s.schema: %v", param, err).WithCode(code)
		}
	}
	g.buildVocab()
	a := jsongrammar.NewAutomaton(gr, g.v)
	g.compile += time.Since(t0)
	// The compacted schema and the key of a schema sent compacted agree.
	for _, b := range g.lru {
		if b.Grammar().Key == gr.Key {
			return b, nil
		}
	}
	if len(g.lru) == maxGrammars {
		old := g.lru[len(g.lru)-1]
		st := old.Stats()
		g.evicted.MaskTime += st.MaskTime
		g.evicted.Computed += st.Computed
		g.evicted.Degraded += st.Degraded
		g.lru = g.lru[:len(g.lru)-1]
	}
	g.lru = append([]*jsongrammar.Automaton{a}, g.lru...)
	return a, nil
}

// grammarStats are the figures of the grammar cache, for /metrics.
type grammarStats struct {
	Grammars     int
	States       int
	MaskBytes    int64
	VocabBytes   int64
	CompileTime  time.Duration
	MaskTime     time.Duration
	MasksCompute int64
	// MasksDegraded are the masks of one-byte tokens only.
	MasksDegraded int64
}

func (g *grammars) stats() grammarStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := grammarStats{Grammars: len(g.lru), CompileTime: g.compile, MaskTime: g.evicted.MaskTime, MasksCompute: g.evicted.Computed, MasksDegraded: g.evicted.Degraded}
	if g.v != nil {
		s.VocabBytes = g.v.Bytes()
	}
	for _, a := range g.lru {
		st := a.Stats()
		s.States += st.States
		s.MaskBytes += st.MaskBytes
		s.MaskTime += st.MaskTime
		s.MasksCompute += st.Computed
		s.MasksDegraded += st.Degraded
	}
	return s
}

// canonical reports whether token b may follow token a in generated text
// of a restricted tokenizer: the tokenizer encodes their text back to
// the pair, so a router that resumes from the text gets the same ids.
// Only a pair with a token sampled under a grammar alone can break that.
func (g *grammars) canonical(a, b int) bool {
	if a < 0 || !g.extra[a] && !g.extra[b] {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	k := [2]int{a, b}
	ok, seen := g.pairs[k]
	if !seen {
		ok = slices.Equal(g.tok.Encode(g.text[a]+g.text[b]), []int{a, b})
		g.pairs[k] = ok
	}
	return ok
}

// constraint is a sequence's grammar: where its text is in it.
type constraint struct {
	g    *grammars
	a    *jsongrammar.Automaton
	s    *jsongrammar.State
	d    *jsongrammar.Distinct // the items and keys to keep distinct (nil: none can repeat)
	prev int                   // the last token of the text, -1 before any
}

// newConstraint starts f's grammar after the prompt's last resumed
// tokens (the answer so far of a resumed attempt).
func (g *grammars) newConstraint(f *protocol.ResponseFormat, prompt []int) (*constraint, *protocol.Error) {
	a, perr := g.automaton(f, "response_format")
	if perr != nil {
		return nil, perr
	}
	c := &constraint{g: g, a: a, s: a.Start(), prev: -1}
	if a.Grammar().NeedsDistinct() {
		c.d = &jsongrammar.Distinct{}
	}
	n := f.ResumedTokens
	if n < 0 || n >= len(prompt) {
		return nil, protocol.InvalidRequest("response_format.resumed_tokens", "resumed_tokens must be in [0, %d), got %d", len(prompt), n).WithCode(protocol.CodeInvalidValue)
	}
	for _, id := range prompt[len(prompt)-n:] {
		c.advance(id)
	}
	if c.s.Dead() {
		return nil, protocol.InvalidRequest("response_format.resumed_tokens", "the last %d tokens of the prompt do not begin a text of the response format", n).WithCode(protocol.CodeInvalidValue)
	}
	return c, nil
}

// advance moves past token id.
func (c *constraint) advance(id int) {
	if id >= 0 && id < len(c.g.text) {
		if c.d != nil {
			c.s, _ = c.d.Feed(c.a, c.s, c.g.text[id])
		} else {
			c.s = c.a.Feed(c.s, c.g.text[id])
		}
	}
	c.prev = id
}

// gate returns what the sampler may pick next: the tokens the grammar
// admits, EOS where the value may end, a veto of the non-canonical pairs
// (nil when the tokenizer has none), and a refusal of the tokens that
// would repeat an item of an array under uniqueItems or a key of an
// object (nil when none can).
func (c *constraint) gate() (mask []uint64, end bool, veto, refuse func(int) bool) {
	mask = c.a.Mask(c.s)
	if c.g.extras && c.prev >= 0 {
		prev := c.prev
		veto = func(id int) bool { return !c.g.canonical(prev, id) }
	}
	if c.d != nil {
		refuse = func(id int) bool { return id < len(c.g.text) && c.d.Refuses(c.a, c.s, c.g.text[id]) }
	}
	return mask, c.s.CanEnd(), veto, refuse
}

// pick samples the next token of s, within its grammar if it has one.
// When the canonical veto leaves no token the grammar admits, the pick
// goes without it: the text stays in the grammar, the ids may differ
// from the text's encoding.
func (e *Engine) pick(s *sequence) int {
	sm := s.sampler
	if s.gram == nil {
		return sm.pick(e.logits)
	}
	sm.gate, sm.endOK, sm.veto, sm.refuse = s.gram.gate()
	sm.eos = e.grammars.eosMask
	defer func() { sm.gate, sm.veto, sm.refuse = nil, nil, nil }()
	if sm.veto == nil {
		return sm.pick(e.logits)
	}
	logits := append([]float32(nil), e.logits...) // pick adjusts them
	if id := sm.pick(e.logits); id >= 0 {
		return id
	}
	copy(e.logits, logits)
	sm.veto = nil
	return sm.pick(e.logits)
}
