package timing

import (
	"math"
	"time"
)

// Chunk is a run of one sequence's positions that a step computes: New
// positions after Cached ones already in its KV.
type Chunk struct {
	New, Cached int
}

// Step is the work of one engine step: the prefill chunks, the decoding
// sequences (one token each, attending to Context tokens in all), and
// how many sequences sample (their logits go through the LM head).
type Step struct {
	Prefill []Chunk
	Decode  int
	Context int
	Sampled int
}

// Empty reports whether the step computes nothing.
func (s Step) Empty() bool { return len(s.Prefill) == 0 && s.Decode == 0 }

// tokens is the step's positions: every chunk's and one per decoding
// sequence.
func (s Step) tokens() int {
	n := s.Decode
	for _, c := range s.Prefill {
		n += c.New
	}
	return n
}

// attention is the step's query-key pairs and the KV positions it reads:
// each chunk's causal triangle over its cached context, each decoding
// token against its context.
func (s Step) attention() (pairs, reads float64) {
	for _, c := range s.Prefill {
		n, k := float64(c.New), float64(c.Cached)
		pairs += n*k + n*(n+1)/2
		reads += k + n
	}
	return pairs + float64(s.Context), reads + float64(s.Context)
}

// StepTime is how long the profile's GPUs take to run the step.
func (p Profile) StepTime(s Step) time.Duration {
	if s.Empty() {
		return 0
	}
	return seconds(p.stepSeconds(s))
}

func (p Profile) stepSeconds(s Step) float64 {
	m, tp := p.Model, float64(p.TP)
	layers := float64(m.Layers)
	n := float64(s.tokens())
	t := layers * p.layerSeconds(n)
	if s.Sampled > 0 {
		t += p.linear(m.headParams()/tp, float64(s.Sampled))
	}
	pairs, reads := s.attention()
	width := float64(m.Heads*m.HeadDim) / tp
	flops := 4 * width * pairs
	kv := reads * m.KVBytesPerToken() / layers / tp
	t += layers * math.Max(flops/(p.GPU.FLOPS*p.AttentionEff), kv/(p.GPU.Bandwidth*p.MemoryEff))
	if p.TP > 1 {
		t += 2 * layers * p.AllReduce.seconds(n*float64(m.Hidden)*bf16)
	}
	return t
}

// layerSeconds is one layer's linear and element-wise kernels on n
// tokens: what Vidur's mlp.csv profiles measure.
func (p Profile) layerSeconds(n float64) float64 {
	linear := p.linear(p.Model.layerParams()/float64(p.TP), n)
	return linear + hypot(p.ElementwiseFloor.Seconds(), p.ElementwisePerToken.Seconds()*n)
}

// linear is a weight matrix of params weights applied to n tokens: the
// bend between reading the weights and computing with them.
func (p Profile) linear(params, n float64) float64 {
	compute := 2 * params * n / (p.GPU.FLOPS * p.ComputeEff)
	memory := params * bf16 / (p.GPU.Bandwidth * p.MemoryEff)
	return hypot(compute, memory)
}

// TransferTime is how long sending the KV of tokens positions takes on
// link: each GPU of the group sends its share on its own link.
func (p Profile) TransferTime(tokens int, link Link) time.Duration {
	if tokens <= 0 {
		return 0
	}
	return seconds(link.seconds(float64(tokens) * p.KVBytesPerToken()))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
