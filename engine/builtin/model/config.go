package model

import (
	"encoding/binary"
	"hash/fnv"
)

// Config is the shape of a model.
type Config struct {
	Vocab     int     // vocabulary size
	Dim       int     // model (and key/value) width
	Layers    int     // decoder layers
	Heads     int     // attention heads; Dim must be a multiple
	FFN       int     // feed-forward hidden width
	RopeTheta float64 // rotary embedding base
	NormEps   float32 // RMSNorm epsilon
	// EOS is the end-of-sequence token and EOSBias is added to its logit:
	// a negative bias keeps random weights from ending generations early.
	EOS     int
	EOSBias float32
}

// DefaultConfig is the built-in shape for a vocabulary of the given size.
func DefaultConfig(vocab, eos int) Config {
	return Config{
		Vocab: vocab, Dim: 64, Layers: 2, Heads: 4, FFN: 172,
		RopeTheta: 10000, NormEps: 1e-5, EOS: eos, EOSBias: -8,
	}
}

// HeadDim is the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// fingerprint hashes a name and a shape, identifying a model across
// processes.
func fingerprint(name string, c Config) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	for _, v := range []int{c.Vocab, c.Dim, c.Layers, c.Heads, c.FFN, c.EOS} {
		_ = binary.Write(h, binary.LittleEndian, int64(v))
	}
	return h.Sum64()
}
