package model

import "fmt"

// KV is slot-addressed key/value memory: the key of slot s in layer l is
// K[l][s*Dim : (s+1)*Dim], likewise for values.
type KV struct {
	K, V [][]float32
}

// Model is a loaded model. It is read-only and safe for concurrent use;
// each caller brings its own [Scratch].
type Model struct {
	name        string
	cfg         Config
	fingerprint uint64
	embed       []float32 // Vocab x Dim
	lmHead      []float32 // Vocab x Dim, the output projection
	layers      []layer
	finalNorm   []float32
}

// New builds the model called name with the given shape.
func New(name string, cfg Config) (*Model, error) {
	if cfg.Vocab < 2 || cfg.Dim <= 0 || cfg.Heads <= 0 || cfg.Dim%cfg.Heads != 0 || cfg.HeadDim()%2 != 0 {
		return nil, fmt.Errorf("model %q: bad shape %+v", name, cfg)
	}
	m := &Model{name: name, cfg: cfg, fingerprint: fingerprint(name, cfg)}
	m.initWeights(name)
	return m, nil
}

// Config returns the model's shape.
func (m *Model) Config() Config { return m.cfg }

// Name returns the model's name.
func (m *Model) Name() string { return m.name }

// Fingerprint identifies the model's name and shape; two processes with the
// same fingerprint compute the same keys and values.
func (m *Model) Fingerprint() uint64 { return m.fingerprint }

// Scratch is the working memory of one Forward caller.
type Scratch struct {
	x, h, q, k, v, att, proj []float32
	gate, up                 []float32
	cos, sin, scores         []float32
}

// NewScratch returns working memory for m.
func (m *Model) NewScratch() *Scratch {
	d, f, hd := m.cfg.Dim, m.cfg.FFN, m.cfg.HeadDim()
	return &Scratch{
		x: make([]float32, d), h: make([]float32, d), q: make([]float32, d),
		k: make([]float32, d), v: make([]float32, d), att: make([]float32, d),
		proj: make([]float32, d), gate: make([]float32, f), up: make([]float32, f),
		cos: make([]float32, hd/2), sin: make([]float32, hd/2),
	}
}

// Forward runs token at position pos = len(slots)-1: slots[p] is the KV slot
// of position p. It writes the token's keys and values to slots[pos] in
// every layer, attending over positions 0..pos, whose keys and values must
// already be in kv. When logits is not nil (length Vocab) it receives the
// next-token logits.
func (m *Model) Forward(kv KV, slots []int, token int, s *Scratch, logits []float32) {
	pos := len(slots) - 1
	if need := m.cfg.Heads * len(slots); cap(s.scores) < need {
		s.scores = make([]float32, need, 2*need)
	}
	scores := s.scores[:m.cfg.Heads*len(slots)]
	d := m.cfg.Dim
	copy(s.x, m.embed[token*d:(token+1)*d])
	ropeAngles(pos, m.cfg.HeadDim(), m.cfg.RopeTheta, s.cos, s.sin)
	for l := range m.layers {
		m.layerForward(kv, l, slots, s, scores)
	}
	if logits != nil {
		m.logits(s, logits)
	}
}

// layerForward runs decoder layer l for the token in s.x.
func (m *Model) layerForward(kv KV, l int, slots []int, s *Scratch, scores []float32) {
	w := &m.layers[l]
	c := m.cfg
	rmsnorm(s.h, s.x, w.attnNorm, c.NormEps)
	matvec(s.q, w.wq, s.h)
	matvec(s.k, w.wk, s.h)
	matvec(s.v, w.wv, s.h)
	applyRope(s.q, c.Heads, c.HeadDim(), s.cos, s.sin)
	applyRope(s.k, c.Heads, c.HeadDim(), s.cos, s.sin)
	slot := slots[len(slots)-1]
	copy(kv.K[l][slot*c.Dim:(slot+1)*c.Dim], s.k)
	copy(kv.V[l][slot*c.Dim:(slot+1)*c.Dim], s.v)
	m.attend(kv, l, slots, s.q, s.att, scores)
	matvec(s.proj, w.wo, s.att)
	for i := range s.x {
		s.x[i] += s.proj[i]
	}
	rmsnorm(s.h, s.x, w.ffnNorm, c.NormEps)
	matvec(s.gate, w.w1, s.h)
	matvec(s.up, w.w3, s.h)
	for i := range s.gate {
		s.gate[i] = silu(s.gate[i]) * s.up[i]
	}
	matvec(s.proj, w.w2, s.gate)
	for i := range s.x {
		s.x[i] += s.proj[i]
	}
}

// logits projects the final hidden state onto the vocabulary.
func (m *Model) logits(s *Scratch, out []float32) {
	rmsnorm(s.h, s.x, m.finalNorm, m.cfg.NormEps)
	matvec(out, m.lmHead, s.h)
	out[m.cfg.EOS] += m.cfg.EOSBias
}
