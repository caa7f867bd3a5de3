package builtin

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"

	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// sampler picks the next token of one sequence from the model's logits.
type sampler struct {
	p       *genParams
	allowed []bool // ids the model may sample
	// Of a sequence under a grammar, for the next pick: the ids it
	// admits (replacing allowed), whether EOS may end the text (eos: the
	// EOS ids), a veto over the admitted ids that the pick may drop when
	// it leaves none (nil: none), and one it may not (refuse).
	gate   []uint64
	eos    []uint64
	endOK  bool
	veto   func(int) bool
	refuse func(int) bool
	rng    *rand.Rand
	counts map[int]int // generated tokens, for the penalties
	probs  []float64
	order  []int
}

func newSampler(p *genParams, allowed []bool, choice int) *sampler {
	s := &sampler{p: p, allowed: allowed, counts: map[int]int{}}
	if p.temperature > 0 {
		seed := rand.Uint64()
		if p.seed != nil {
			seed = uint64(protocol.ChoiceSeed(*p.seed, p.n, choice))
		}
		s.rng = rand.New(rand.NewPCG(seed, 0))
	}
	return s
}

// adjust applies logit_bias and the presence and frequency penalties.
func (s *sampler) adjust(logits []float32) {
	for id, b := range s.p.logitBias {
		if id < len(logits) {
			logits[id] += b
		}
	}
	if s.p.presence == 0 && s.p.frequency == 0 {
		return
	}
	for id, n := range s.counts {
		logits[id] -= float32(s.p.presence + s.p.frequency*float64(n))
	}
}

// pick returns the next token and records it.
func (s *sampler) pick(logits []float32) int {
	s.adjust(logits)
	var id int
	if s.rng == nil {
		id = s.greedy(logits)
	} else {
		id = s.draw(logits)
	}
	if id >= 0 {
		s.counts[id]++
	}
	return id
}

// ok reports whether the sampler may pick id.
func (s *sampler) ok(id int) bool {
	if s.gate == nil {
		return s.allowed[id]
	}
	if s.gate[id>>6]&(1<<(id&63)) == 0 {
		return s.endOK && s.eos[id>>6]&(1<<(id&63)) != 0
	}
	return (s.veto == nil || !s.veto(id)) && (s.refuse == nil || !s.refuse(id))
}

// greedy returns the allowed id of the highest logit, the lowest on a tie.
func (s *sampler) greedy(logits []float32) int {
	if s.gate != nil {
		return s.greedyGated(logits)
	}
	best := -1
	for id, l := range logits {
		if s.ok(id) && (best < 0 || l > logits[best]) {
			best = id
		}
	}
	return best
}

// draw samples from softmax(logits/temperature) restricted to top_p.
func (s *sampler) draw(logits []float32) int {
	maxL := math.Inf(-1)
	for id, l := range logits {
		if s.ok(id) {
			maxL = math.Max(maxL, float64(l))
		}
	}
	s.probs = s.probs[:0]
	s.order = s.order[:0]
	var sum float64
	for id, l := range logits {
		p := 0.0
		if s.ok(id) {
			p = math.Exp((float64(l) - maxL) / s.p.temperature)
			s.order = append(s.order, id)
		}
		s.probs = append(s.probs, p)
		sum += p
	}
	if len(s.order) == 0 {
		return -1
	}
	sort.SliceStable(s.order, func(i, j int) bool { return s.probs[s.order[i]] > s.probs[s.order[j]] })
	keep, mass := s.topP(sum)
	u := s.rng.Float64() * mass
	for _, id := range s.order[:keep] {
		u -= s.probs[id]
		if u < 0 {
			return id
		}
	}
	return s.order[keep-1]
}

// topP returns how many of the ordered ids make up top_p of the mass, and
// their mass.
func (s *sampler) topP(sum float64) (int, float64) {
	if s.p.topP >= 1 {
		return len(s.order), sum
	}
	var mass float64
	for i, id := range s.order {
		mass += s.probs[id]
		if mass >= s.p.topP*sum {
			return i + 1, mass
		}
	}
	return len(s.order), mass
}

// greedyGated is greedy under a grammar: it visits the ids the gate
// admits, bit by bit, rather than every id of the vocabulary; the veto
// and refusal, which cost more, are asked of the best id only (and of
// the next best while they turn it down).
func (s *sampler) greedyGated(logits []float32) int {
	var turned map[int]bool
	for {
		best := -1
		for w := range s.gate {
			word := s.gate[w]
			if s.endOK {
				word |= s.eos[w]
			}
			for word != 0 {
				id := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if id >= len(logits) {
					break
				}
				if turned[id] {
					continue
				}
				if best < 0 || logits[id] > logits[best] || logits[id] == logits[best] && id < best {
					best = id
				}
			}
		}
		if best < 0 || s.gate[best>>6]&(1<<(best&63)) == 0 || s.ok(best) {
			return best // none, EOS, or an id nothing turns down
		}
		if turned == nil {
			turned = map[int]bool{}
		}
		turned[best] = true
	}
}
